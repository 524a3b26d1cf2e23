package dev.decodiff.harness.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.dump.CompletenessMark;
import dev.decodiff.harness.dump.DumpManifest;
import dev.decodiff.harness.dump.DumpValidator;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.concurrent.Callable;

@Command(name = "validate", mixinStandardHelpOptions = true,
        description = {"Checks that a dump conforms to the dump format v1 (docs/dump-format.md), whoever wrote it: the manifest's schema,"
                + " the completeness mark, every step file (inside the folder, a sound safetensors header, float tensors),"
                + " each capture point's shape, the layers against num_hidden_layers, the same points at every step."
                + " Lists every problem found, not just the first."},
        footer = {"", "Exit codes: 0 valid (with --mark-complete: marked, or already marked), 2 invalid (every problem listed),"
                + " not marked, or usage.",
                "Examples:",
                "  decodiff validate out/my-engine-dump",
                "  decodiff validate --mark-complete out/dump-from-before-the-mark"})
final class ValidateCommand implements Callable<Integer> {
    @Parameters(paramLabel = "DUMP", description = "The dump folder (manifest.json + step files).")
    Path dump;

    @Option(names = "--json", description = "Print the result as JSON ({valid, problems, notes, steps, points}; with --mark-complete also marked).")
    boolean json;

    @Option(names = "--mark-complete", description = {"For a dump without the completeness mark whose producer did finish (one"
            + " made before the mark existed, or by a producer that does not write it): checks every step file in full against"
            + " the format and that the steps feed every token, and only then adds \"complete\": true to manifest.json,"
            + " atomically, leaving every other byte as it was. A dump it cannot prove whole is left untouched (exit 2);"
            + " one that already has the mark is left as it is."})
    boolean markComplete;

    @picocli.CommandLine.Spec
    picocli.CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() throws Exception {
        var out = spec.commandLine().getOut();
        if (markComplete) return markComplete(out);
        var r = DumpValidator.validate(dump);
        report(out, r, null);
        return r.valid() ? Main.MATCH : Main.BAD_INPUT;
    }

    /**
     * validate --mark-complete: the mark only after every check passed, and only on the manifest that was checked —
     * one that changed meanwhile, or a producer's manifest.json.partial beside it (a producer may be writing), is
     * refused.
     */
    private int markComplete(PrintWriter out) throws Exception {
        Path mf = dump.resolve(DumpManifest.FILE_NAME);
        var first = DumpValidator.validate(dump);
        if (first.manifest() != null && first.manifest().complete()) {
            report(out, first, dump + ": already carries the completeness mark; manifest.json left as it is");
            return first.valid() ? Main.MATCH : Main.BAD_INPUT;
        }
        if (Files.isSymbolicLink(mf))
            throw new BadInputException(mf, "is a symbolic link; not marked — a new manifest.json would replace the link, not the file it"
                    + " points to: copy the file in place of the link, then run validate --mark-complete again");
        Path partial = dump.resolve(DumpManifest.FILE_NAME + ".partial");
        if (Files.exists(partial, LinkOption.NOFOLLOW_LINKS))
            throw new BadInputException(partial, "exists: a producer may be writing this dump right now; not marked — let it finish"
                    + " (or remove the file once you know it has stopped), then run validate --mark-complete again");
        String before = first.manifest() == null ? null : Files.readString(mf);
        var r = DumpValidator.validateForMark(dump);
        if (!r.valid()) {
            report(out, r, dump + ": NOT marked complete; manifest.json left as it is — fix the problems above or re-create the dump");
            return Main.BAD_INPUT;
        }
        if (!Files.readString(mf).equals(before))
            throw new BadInputException(mf, "changed while its dump was being checked; not marked — run validate --mark-complete again once nothing writes to it");
        AtomicFile.write(mf, CompletenessMark.add(before), "manifest.json with the completeness mark");
        var marked = DumpValidator.validate(dump);
        if (!marked.valid()) {
            report(out, marked, null);
            return Main.BAD_INPUT;
        }
        report(out, marked, dump + ": every step file checked in full; marked complete (\"complete\": true added to manifest.json)");
        return Main.MATCH;
    }

    private void report(PrintWriter out, DumpValidator.Result r, String outcome) throws Exception {
        if (json) {
            var o = new ObjectMapper().createObjectNode();
            o.put("dump", dump.toString());
            o.put("valid", r.valid());
            r.problems().forEach(o.putArray("problems")::add);
            r.notes().forEach(o.putArray("notes")::add);
            if (r.manifest() != null) o.put("steps", r.manifest().stepCount());
            o.put("points", r.points().size());
            if (markComplete) o.put("marked", r.valid() && r.manifest() != null && r.manifest().complete());
            if (outcome != null) o.put("outcome", outcome);
            out.println(dev.decodiff.harness.Printable.json(new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT)).writeValueAsString(o));
        } else {
            out = PrintableLines.around(out);
            if (r.valid()) {
                var m = r.manifest();
                out.println(dump + ": valid dump v" + m.version() + " (" + m.stepCount() + " steps, " + r.points().size() + " points, "
                        + m.model().numHiddenLayers() + " layers" + (m.selectedPoints() == null ? "" : ", points selected by " + String.join(",", m.selectedPoints())) + ")");
            } else {
                out.println(dump + ": INVALID, " + r.problems().size() + (r.problems().size() == 1 ? " problem:" : " problems:"));
                for (String p : r.problems()) out.println("  - " + p);
            }
            for (String n : r.notes()) out.println("  note: " + n);
            if (outcome != null) out.println(outcome);
        }
        out.flush();
    }
}
