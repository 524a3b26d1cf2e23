package dev.decodiff.harness.cli;

import dev.decodiff.harness.OutputPaths;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.calibrate.Calibration;
import dev.decodiff.harness.calibrate.CalibrationReport;
import dev.decodiff.harness.report.ProgressBar;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.Callable;

@Command(name = "calibrate", mixinStandardHelpOptions = true,
        description = "Derives a tolerance profile from the noise floor: compares two references of one model and one token sequence "
                + "that differ only in precision (e.g. transformers in float32 and in bfloat16) and sets each point kind's tolerance to "
                + "FACTOR × its worst rel L2. `compare --tolerance FILE` then judges a bf16 engine fairly (docs/tolerances.md).",
        footer = {"", "Exit codes: 0 profile written, 2 bad input or usage (different checkpoints or tokens, an existing --out without --force).",
                "Example:",
                "  decodiff calibrate reference-dumps/gemma4-tiny/long reference-dumps/gemma4-tiny/long-bf16 --out bf16.json",
                "  decodiff compare reference-dumps/gemma4-tiny/long my-bf16-dump --tolerance bf16.json"})
final class CalibrateCommand implements Callable<Integer> {
    @Parameters(index = "0", paramLabel = "REF_FP32", description = "The reference candidates are judged against (float32).")
    Path reference;

    @Parameters(index = "1", paramLabel = "REF_BF16", description = "Its noisy twin: the same model and tokens in lower precision (bfloat16).")
    Path noisy;

    @Option(names = "--out", paramLabel = "FILE", required = true, description = "Where to write the profile (JSON).")
    Path out;

    @Option(names = "--force", description = "Overwrite FILE if it exists.")
    boolean force;

    @Option(names = "--factor", paramLabel = "F", defaultValue = "" + Calibration.DEFAULT_FACTOR,
            description = "Safety factor over the worst rel L2 of each kind (default ${DEFAULT-VALUE}).")
    double factor;

    @Option(names = "--per-layer", description = "Also set a tolerance per layer point (layers.i.KIND): tighter on early layers, where the noise is smaller.")
    boolean perLayer;

    @picocli.CommandLine.Mixin
    JsonOption json = new JsonOption();

    @picocli.CommandLine.Spec
    picocli.CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() {
        OutputPaths.refuseOverlap("--out", out, OutputPaths.withBundledData(reference, noisy));
        if (Files.isDirectory(out)) throw new BadInputException(out, "is a folder; --out names the profile file to write");
        if (Files.exists(out) && !force) throw new BadInputException(out, "exists; pass --force to overwrite it, or choose another --out");
        Calibration.Result r;
        Path mf = reference.resolve(dev.decodiff.harness.dump.DumpManifest.FILE_NAME);
        int steps = Files.isRegularFile(mf) ? dev.decodiff.harness.dump.DumpReader.parseManifest(mf).stepCount() : 0;
        try (var bar = new ProgressBar("comparing", steps)) {
            r = Calibration.run(reference, noisy, factor, perLayer, bar::update);
        }
        write(r.profileJson());
        var o = spec.commandLine().getOut();
        if (json.on()) o.println(r.profileJson());
        else o.print(dev.decodiff.harness.Printable.lines(CalibrationReport.terminal(r, out.toString())));
        o.flush();
        return Main.MATCH;
    }

    private void write(String profile) { AtomicFile.write(out, profile + "\n", "the profile"); }
}
