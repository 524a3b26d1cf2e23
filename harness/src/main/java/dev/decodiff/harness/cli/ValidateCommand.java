package dev.decodiff.harness.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import dev.decodiff.harness.dump.DumpValidator;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import java.nio.file.Path;
import java.util.concurrent.Callable;

@Command(name = "validate", mixinStandardHelpOptions = true,
        description = {"Checks that a dump conforms to the dump format v1 (docs/dump-format.md), whoever wrote it: the manifest's schema,"
                + " the completeness mark, every step file (inside the folder, a sound safetensors header, float tensors),"
                + " each capture point's shape, the layers against num_hidden_layers, the same points at every step."
                + " Lists every problem found, not just the first."},
        footer = {"", "Exit codes: 0 valid, 2 invalid (every problem listed) or usage.",
                "Example:",
                "  decodiff validate out/my-engine-dump"})
final class ValidateCommand implements Callable<Integer> {
    @Parameters(paramLabel = "DUMP", description = "The dump folder (manifest.json + step files).")
    Path dump;

    @Option(names = "--json", description = "Print the result as JSON ({valid, problems, notes, steps, points}).")
    boolean json;

    @picocli.CommandLine.Spec
    picocli.CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() throws Exception {
        var r = DumpValidator.validate(dump);
        var out = spec.commandLine().getOut();
        if (json) {
            var o = new ObjectMapper().createObjectNode();
            o.put("dump", dump.toString());
            o.put("valid", r.valid());
            r.problems().forEach(o.putArray("problems")::add);
            r.notes().forEach(o.putArray("notes")::add);
            if (r.manifest() != null) o.put("steps", r.manifest().stepCount());
            o.put("points", r.points().size());
            out.println(new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT).writeValueAsString(o));
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
        }
        out.flush();
        return r.valid() ? Main.MATCH : Main.BAD_INPUT;
    }
}
