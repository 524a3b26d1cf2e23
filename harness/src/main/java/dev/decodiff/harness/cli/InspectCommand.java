package dev.decodiff.harness.cli;

import dev.decodiff.engine.CheckpointFiles;
import dev.decodiff.harness.arch.ArchitectureSupport;
import dev.decodiff.harness.arch.ArchitectureSupports;
import dev.decodiff.harness.arch.CheckpointDescriber;
import dev.decodiff.engine.CapturePoints;
import dev.decodiff.harness.report.Fmt;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.compare.Comparison;
import dev.decodiff.harness.dump.DumpManifest;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.metal.SafetensorsException;
import dev.decodiff.metal.SafetensorsFile;
import picocli.CommandLine.Command;
import picocli.CommandLine.Parameters;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.Callable;

@Command(name = "inspect", mixinStandardHelpOptions = true,
        description = "Describes a checkpoint (config per layer, tensors, bytes, dtypes, hashes), a dump (manifest, steps, points), a .safetensors or a .gguf file (metadata and tensors).")
final class InspectCommand implements Callable<Integer> {
    @Parameters(paramLabel = "PATH", description = "A checkpoint folder, a dump folder, a .safetensors or a .gguf file.")
    Path path;

    @picocli.CommandLine.Spec
    picocli.CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() {
        var out = PrintableLines.around(spec.commandLine().getOut());
        if (!Files.exists(path)) throw new BadInputException(path, "does not exist");
        if (Files.isDirectory(path) && Files.exists(path.resolve(DumpManifest.FILE_NAME), java.nio.file.LinkOption.NOFOLLOW_LINKS)) dump(out);
        else if (Files.isDirectory(path) && Files.isRegularFile(path.resolve("config.json"))) checkpoint(out);
        else if (Files.isRegularFile(path) && path.toString().endsWith(".safetensors")) file(out, path);
        else if (Files.isRegularFile(path) && path.toString().endsWith(".gguf")) dev.decodiff.llamacpp.gguf.GgufReport.print(dev.decodiff.llamacpp.gguf.GgufFile.read(path), out);
        else throw new BadInputException(path, "is neither a dump (manifest.json), a checkpoint (config.json), a .safetensors nor a .gguf file");
        out.flush();
        return Main.MATCH;
    }

    private void dump(PrintWriter out) {
        var d = DumpReader.open(path);
        var m = d.manifest();
        out.println("dump " + path + "  (format " + m.format() + " v" + m.version() + ")");
        var p = m.producer();
        if (p != null) {
            out.println("  producer   " + p.describe() + (p.attention() == null ? "" : ", attention " + p.attention()));
            if (p.options() != null) out.println("  made by    decodiff " + String.join(" ", p.options()));
            if (p.quantization() != null) out.println("  weights    " + DumpManifest.weights(p.quantization()) + ", dequantized to fp32");
        }
        var mm = m.model();
        out.println("  model      " + mm.modelType() + ", " + mm.numHiddenLayers() + " layers");
        out.println("  config     sha256 " + mm.configSha256());
        out.println("  weights    sha256 " + (mm.weightsSha256() == null ? "(not given)" : mm.weightsSha256()));
        out.println("  tokens     " + m.tokens().size() + " (prompt " + m.promptLength() + "): " + abbreviate(m.tokens()));
        long bytes = 0;
        for (int s = 0; s < d.stepCount(); s++) {
            try { bytes += Files.size(d.stepFile(s)); } catch (IOException e) { /* checked on open */ }
        }
        out.println("  steps      " + d.stepCount() + " (" + human(bytes) + " on disk)");
        out.println("  complete   " + (m.complete() ? "yes (the producer marked it finished)" : "NO: " + String.join("; ", d.gaps())));
        if (m.selectedPoints() != null) out.println("  selection  --points " + String.join(",", m.selectedPoints()) + " (other points left out by choice)");
        if (d.readRows() != null) out.println("  reads      k_read/v_read hold the last " + d.readRows().last() + " positions read at most (read_rows " + d.readRows() + ")");
        out.println();
        out.println("  step  start  len  next_token  top2_margin  points");
        for (var st : m.steps())
            out.printf(Locale.ROOT, "  %4d  %5d  %3d  %10s  %11s  %6d%n", st.index(), st.start(), st.length(),
                    st.nextToken() == null ? "-" : st.nextToken().toString(),
                    st.top2Margin() == null ? "-" : Fmt.format("%.4f", st.top2Margin()), d.points(st.index()).size());
        out.println();
        var all = Comparison.causalOrder(d.allPoints());
        var model = new ArrayList<String>();
        var kinds = new LinkedHashMap<String, TreeMap<Integer, Boolean>>();
        for (String pt : all) {
            int l = CapturePoints.layerOf(pt);
            if (l < 0) model.add(pt);
            else kinds.computeIfAbsent(CapturePoints.kindOf(pt), k -> new TreeMap<>()).put(l, true);
        }
        out.println("  points     " + all.size() + " names");
        if (!model.isEmpty()) out.println("    model-level  " + String.join(", ", model));
        for (var e : kinds.entrySet()) out.println("    " + Fmt.pad(e.getKey(), 12) + " layers " + Fmt.ranges(e.getValue().keySet(), 0));
        try (var s0 = d.readStep(0)) {
            out.println();
            out.println("  shapes at step 0 (first of each kind):");
            var seen = new java.util.HashSet<String>();
            for (String pt : Comparison.causalOrder(s0.points())) {
                if (!seen.add(CapturePoints.kindOf(pt))) continue;
                var t = s0.tensor(pt);
                out.println("    " + Fmt.pad(pt, 24) + " " + t.dtype() + " " + t.shapeString());
            }
        }
    }

    private void checkpoint(PrintWriter out) {
        var model = ArchitectureSupports.featureFor(path, ArchitectureSupport::checkpointDescriber).read(path);
        // The weights against the config, as run and dump load them: a config declaring 8 layers over weights of 6,
        // or another head_dim, is bad input here too, not a description of a model that cannot run.
        try (var files = CheckpointFiles.open(path)) {
            model.check(files);
            describe(out, model, files);
        }
    }

    private void describe(PrintWriter out, CheckpointDescriber.Described model, CheckpointFiles files) {
        out.println("checkpoint " + path);
        model.print(out);
        var dtypes = new TreeMap<String, long[]>();
        for (var t : files.stored().values()) {
            var c = dtypes.computeIfAbsent(t.dtype().toString(), k -> new long[2]);
            c[0]++;
            c[1] += t.data().byteSize();
        }
        out.println("  tensors    " + files.stored().size() + " in " + files.shardPaths().size() + " file(s), " + human(files.totalBytes())
                + " (prefix '" + files.prefix() + "')");
        for (var e : dtypes.entrySet()) out.println("    " + e.getKey() + ": " + e.getValue()[0] + " tensors, " + human(e.getValue()[1]));
        var q = files.quantization();
        if (q != null) quantization(out, files, q);
        out.println("  config     sha256 " + CheckpointFiles.sha256(path.resolve("config.json")));
        out.println("  weights    sha256 " + files.weightsSha256());
        out.println("  tokenizer  " + (Files.isRegularFile(path.resolve("tokenizer.json")) ? "tokenizer.json" : "(none)"));
    }

    /** The quantization: defaults, how many tensors each spec covers, every override, the matrices left in float. */
    private static void quantization(PrintWriter out, CheckpointFiles files, dev.decodiff.engine.quant.QuantizationSummary q) {
        out.println("  quantized  " + q.describe());
        for (String c : q.countsBySpec()) out.println("    " + c);
        for (String o : q.overrides()) out.println("    override " + o);
        var kept = new ArrayList<String>();
        for (var t : files.stored().values())
            if (t.rank() == 2 && t.dtype().isFloat() && !q.tensors().containsKey(t.name()) && !t.name().endsWith(".scales")
                    && !t.name().endsWith(".biases") && !dev.decodiff.engine.quant.QuantizedTensors.isMedia(t.name()))
                kept.add(t.name() + " " + t.dtype() + " " + t.shapeString());
        for (int i = 0; i < kept.size() && i < 12; i++) out.println("    not quantized " + kept.get(i));
        if (kept.size() > 12) out.println("    not quantized … and " + (kept.size() - 12) + " more");
        long packed = files.packedBytes();
        long fp32 = q.tensors().keySet().stream().filter(n -> !q.packed().contains(n)).mapToLong(n -> files.get(n).data().byteSize()).sum();
        if (packed > 0) out.println("    the engine holds " + q.packed().size() + " packed: " + human(packed) + " of codes, scales and biases");
        if (fp32 > 0 || packed == 0) out.println("    the engine holds " + (q.tensors().size() - q.packed().size()) + " as fp32: " + human(fp32));
    }

    private void file(PrintWriter out, Path f) {
        try (var sf = SafetensorsFile.open(f)) {
            out.println("safetensors " + f + ": " + sf.names().size() + " tensors");
            for (var t : sf.tensors().values()) out.println("  " + Fmt.pad(t.name(), 40) + " " + t.dtype() + " " + t.shapeString());
            if (!sf.metadata().isEmpty()) out.println("  metadata " + sf.metadata());
        } catch (SafetensorsException e) {
            throw new BadInputException(e.getMessage(), e);
        }
    }

    static String abbreviate(List<Integer> t) {
        if (t.size() <= 16) return t.toString();
        return t.subList(0, 12) + " … " + t.subList(t.size() - 3, t.size());
    }


    static String human(long bytes) {
        if (bytes < 1024) return bytes + " B";
        if (bytes < 1 << 20) return Fmt.format("%.1f KiB", bytes / 1024.0);
        if (bytes < 1L << 30) return Fmt.format("%.1f MiB", bytes / 1048576.0);
        return Fmt.format("%.2f GiB", bytes / 1073741824.0);
    }

}
