package dev.decodiff.harness.bench;

import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.decodiff.engine.arch.Architectures;
import dev.decodiff.harness.arch.ArchitectureSupports;
import dev.decodiff.harness.arch.BenchModel;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.Home;
import dev.decodiff.harness.report.Fmt;

import java.io.IOException;
import java.io.PrintWriter;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Consumer;

/**
 * {@code bench --quantized 4,8}: decode of the bench model's MLX affine conversions (made once, cached beside it, by
 * checkpoints/make_mlx_checkpoints.py convert — NumPy, independent of the engine) against the bf16 model itself, all
 * loaded in this process, one greedy step of each in turn from the same 128-token prompt so that load from other
 * processes hits every model alike. Per model: tok/s (wall, median), the process CPU time per step (mean), the weight
 * bytes a token reads and the rate that makes against the best pass of the prefetching reader (one pass after each
 * round) and, step by step, against the pass right after its round (median); each quantized model's speed over bf16
 * is the median of the per-round ratios of wall time, beside the ratio of their total CPU times.
 */
final class QuantizedDecode {
    private QuantizedDecode() {}

    static final int CONTEXT = 128;
    /** Untimed decode rounds before the timed ones. */
    static final int WARM_UP_ROUNDS = 16;

    record Model(String name, long bytesPerToken, long rssAddedBytes, String placement, Figure tokensPerS, Figure cpuMsPerToken,
                 Figure overRoundPass, Figure overBf16, Figure cpuOverBf16) {}

    record Result(List<Model> models, Figure readGbs, int steps) {
        void print(PrintWriter out) {
            out.println(Fmt.format("quantized decode @%d, %d interleaved steps each; best read pass %.1f GB/s", CONTEXT, steps, readGbs.max()));
            for (var m : models) {
                double gbs = m.bytesPerToken / 1e9 * m.tokensPerS.median();
                out.println(Fmt.format("  %-5s %6.2f GB/token  %6.2f tok/s  %7.1f ms CPU/token  %5.1f GB/s = %.2f of the best read pass, %.2f of its round's  load added %.2f GB RSS%s",
                        m.name, m.bytesPerToken / 1e9, m.tokensPerS.median(), m.cpuMsPerToken.median(), gbs, gbs / readGbs.max(), m.overRoundPass.median(), m.rssAddedBytes / 1e9,
                        m.overBf16 == null ? "" : Fmt.format("  %.2f × bf16 (CPU time %.2f ×)", m.overBf16.median(), m.cpuOverBf16.median())));
                out.println("        weights " + m.placement);
            }
        }

        ObjectNode json() {
            var o = JsonNodeFactory.instance.objectNode();
            o.put("context", CONTEXT).put("steps", steps).put("read_bandwidth_best_gbs", readGbs.max());
            var ms = o.putArray("models");
            for (var m : models) {
                var j = ms.addObject().put("name", m.name).put("bytes_per_token", m.bytesPerToken).put("rss_added_by_load_bytes", m.rssAddedBytes)
                        .put("tokens_per_s", m.tokensPerS.median()).put("cpu_ms_per_token", m.cpuMsPerToken.median())
                        .put("read_gbs", m.bytesPerToken / 1e9 * m.tokensPerS.median())
                        .put("over_best_read_pass", m.bytesPerToken / 1e9 * m.tokensPerS.median() / readGbs.max())
                        .put("over_round_read_pass", m.overRoundPass.median())
                        .put("weights", m.placement);
                if (m.overBf16 != null) j.put("decode_over_bf16", m.overBf16.median()).put("decode_over_bf16_min", m.overBf16.min())
                        .put("decode_over_bf16_max", m.overBf16.max()).put("cpu_time_over_bf16", m.cpuOverBf16.median());
            }
            return o;
        }
    }

    /** Parses "4,8" (bits the packed kernels take). */
    static int[] bits(String spec) {
        try {
            int[] b = Arrays.stream(spec.split(",")).map(String::strip).mapToInt(Integer::parseInt).distinct().toArray();
            for (int x : b) if (x != 4 && x != 8) throw new NumberFormatException();
            if (b.length == 0) throw new NumberFormatException();
            return b;
        } catch (NumberFormatException e) {
            throw new BadInputException("--quantized takes bit widths 4 and/or 8 (e.g. --quantized 4,8), got '" + spec + "'");
        }
    }

    /** The MLX conversion of the bench checkpoint {@code dir} at {@code bits}, cached beside it; made first if absent. */
    static Path conversion(Path dir, int bits, Consumer<String> log) throws IOException {
        Path out = dir.resolveSibling(dir.getFileName() + ".mlx" + bits);
        if (Files.isRegularFile(out.resolve("config.json")) && Files.isRegularFile(out.resolve("model.safetensors"))) return out;
        Path script = Home.get().resolve("checkpoints/make_mlx_checkpoints.py");
        if (!Files.isRegularFile(script)) throw new BadInputException(script + ": missing; --quantized converts the bench model with it");
        Path tmp = dir.resolveSibling(out.getFileName() + ".partial");
        BenchCommand.deleteTree(tmp);
        log.accept("converting the bench model to MLX " + bits + "-bit with " + Home.get().relativize(script) + " (NumPy; about a minute)…");
        var p = new ProcessBuilder("python3", script.toString(), "convert", dir.toString(), tmp.toString(), "--bits", Integer.toString(bits))
                .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        int rc;
        try {
            rc = p.waitFor();
        } catch (InterruptedException e) {
            p.destroy();
            Thread.currentThread().interrupt();
            throw new IOException("interrupted while converting", e);
        }
        if (rc != 0 || !Files.isRegularFile(tmp.resolve("model.safetensors"))) {
            BenchCommand.deleteTree(tmp);
            throw new BadInputException("python3 " + script + " convert failed (exit " + rc + "); it needs python3 with NumPy and about 8 GB of free memory — "
                    + "or convert it yourself: python3 " + script + " convert " + dir + " " + out + " --bits " + bits);
        }
        Files.move(tmp, out);
        return out;
    }

    static Result measure(BenchSpec bs, Path dir, int[] bits, int steps, Consumer<String> log) throws IOException {
        var dirs = new ArrayList<Path>();
        var names = new ArrayList<String>();
        dirs.add(dir);
        names.add("bf16");
        for (int b : bits) {
            dirs.add(conversion(dir, b, log));
            names.add(b + "-bit");
        }
        var loader = ArchitectureSupports.of(Architectures.of(dir)).benchModel().orElseThrow(
                () -> new BadInputException(dir, "is not a checkpoint of a family with its own decode bench"));
        var models = new ArrayList<BenchModel>();
        var rss = new long[dirs.size()];
        try {
            for (int i = 0; i < dirs.size(); i++) {
                long before = MeasuredRun.RssSampler.statusBytes("VmRSS:");
                log.accept("loading " + names.get(i) + " (" + dirs.get(i).getFileName() + ")…");
                models.add(loader.load(dirs.get(i)));
                rss[i] = MeasuredRun.RssSampler.statusBytes("VmRSS:") - before;
            }
            int n = models.size();
            var sessions = new BenchModel.Session[n];
            var logits = new float[n][];
            int[] prompt = BenchSetup.randomPrompt(bs.seed(), models.getFirst().vocabSize(), CONTEXT);
            for (int i = 0; i < n; i++) {
                sessions[i] = models.get(i).newSession();
                logits[i] = sessions[i].forward(prompt);
            }
            // Untimed warm-up rounds, the models in turn as in the timed ones: with two steps of each, the JIT was still
            // compiling the decode's Java code (attention, GELU, the soft-cap) into the first timed rounds, and those
            // steps weigh more in the small models' time.
            for (int w = 0; w < WARM_UP_ROUNDS; w++)
                for (int i = 0; i < n; i++) logits[i] = sessions[i].forward(new int[]{dev.decodiff.engine.Sampler.argmax(logits[i])});
            var reader = ReadBandwidth.nativeReader(models.getFirst().streamedWeights());
            if (reader == null) throw new BadInputException("--quantized needs the native kernels: " + dev.decodiff.metal.NativeKernels.status());
            log.accept("decode @" + CONTEXT + ": " + String.join(", ", names) + ", one step of each in turn, " + steps + " rounds…");
            var os = (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
            double[][] wall = new double[n][steps], cpu = new double[n][steps];
            double[] passes = new double[steps];
            int[] next = new int[n];
            for (int i = 0; i < n; i++) next[i] = dev.decodiff.engine.Sampler.argmax(logits[i]);
            for (int s = 0; s < steps; s++) {
                for (int i = 0; i < n; i++) {
                    long c0 = os.getProcessCpuTime(), t0 = System.nanoTime();
                    next[i] = dev.decodiff.engine.Sampler.argmax(sessions[i].forward(new int[]{next[i]}));
                    wall[i][s] = BenchSetup.secondsSince(t0);
                    cpu[i][s] = (os.getProcessCpuTime() - c0) / 1e6;
                }
                passes[s] = reader.getAsDouble();
            }
            var out = new ArrayList<Model>();
            for (int i = 0; i < n; i++) {
                Figure over = null, cpuOver = null;
                if (i > 0) {
                    double[] r = new double[steps];
                    for (int s = 0; s < steps; s++) r[s] = wall[0][s] / wall[i][s];
                    over = Figure.of(r);
                    // the process CPU clock ticks coarsely (10 ms here): the ratio of the totals, not of the steps
                    cpuOver = Figure.of(Arrays.stream(cpu[0]).sum() / Arrays.stream(cpu[i]).sum());
                }
                out.add(new Model(names.get(i), models.get(i).weightBytesPerToken(), rss[i], models.get(i).weightPlacement(),
                        Figure.rates(1, wall[i]), Figure.of(Arrays.stream(cpu[i]).sum() / steps),
                        Decode.overPasses(models.get(i).weightBytesPerToken(), wall[i], passes), over, cpuOver));
            }
            return new Result(out, Figure.of(passes), steps);
        } finally {
            for (var m : models) m.close();
        }
    }
}
