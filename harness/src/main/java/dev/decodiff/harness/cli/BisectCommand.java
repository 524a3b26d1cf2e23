package dev.decodiff.harness.cli;

import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.bisect.BisectReport;
import dev.decodiff.harness.bisect.Bisector;
import dev.decodiff.harness.compare.ToleranceProfile;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.live.ModelLocator;
import dev.decodiff.harness.report.Terminal;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import java.nio.file.Path;
import java.util.concurrent.Callable;

@Command(name = "bisect", mixinStandardHelpOptions = true,
        description = {"Proves why a divergence happens: the culprit cell, the substitution that heals it, and whether the cache history is to blame.",
                "Runs the engine live against a reference dump, then, from compare's first divergent cell, re-runs it with the reference's tensors fed in: per layer the local error (on the reference's input and cache history) vs the",
                "accumulated one, which substituted tensor heals the culprit layer, whether a cache transplant over earlier steps heals the step,",
                "and a one-sentence diagnosis."},
        footer = {"", "Exit codes: 0 no divergence, 1 divergence bisected, 2 bad input or usage.",
                "Examples:",
                "  decodiff bisect --fault k-eq-v-rotated-keys",
                "  decodiff bisect reference-dumps/gemma4-tiny/short --fault ring-wrap --json",
                "  decodiff bisect reference-dumps/gemma4-tiny-ple/long --fault kv-shared-first-source --html bisect.html"})
final class BisectCommand implements Callable<Integer> {
    @Parameters(index = "0", arity = "0..1", paramLabel = "REFERENCE",
            description = "Reference dump folder (default: the bundled case " + Home.DEFAULT_CASE + ").")
    Path reference;

    @Option(names = "--model", paramLabel = "DIR",
            description = "Checkpoint to run (default: the bundled checkpoint whose config and weights hashes match the reference).")
    Path model;

    @picocli.CommandLine.Mixin
    EngineFlags engine = new EngineFlags();

    @Option(names = "--tolerance", paramLabel = "FILE", description = "JSON tolerance profile overriding the defaults (docs/tolerances.md).")
    Path tolerance;

    @Option(names = "--json", description = "Print the machine-readable result (JSON) on stdout instead of the terminal report.")
    boolean json;

    @Option(names = "--html", paramLabel = "FILE", description = "Also write a self-contained HTML report to FILE.")
    Path html;

    @Option(names = "--allow-mismatch", description = "Run even if --model is not the checkpoint the reference was made from.")
    boolean allowMismatch;

    @Option(names = "--no-ops", description = "Skip the op-level check (every metal kernel against ND4J) that runs once a culprit is confirmed.")
    boolean noOps;

    @picocli.CommandLine.Spec
    picocli.CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() {
        HtmlFile.checkTarget(html);
        Path refDir = reference != null ? reference : Home.defaultReference();
        var ref = DumpReader.open(refDir);
        var profile = tolerance != null ? ToleranceProfile.load(tolerance) : ToleranceProfile.defaults();
        Path modelDir = ModelLocator.locate(model, Home.get(), ref.manifest(), ref.manifestFile(), allowMismatch).dir();
        var options = engine.options();
        try (var m = Gemma4Model.load(modelDir)) {
            var result = new Bisector(m, options, ref, profile).run();
            var out = spec.commandLine().getOut();
            // A culprit confirmed on the reference's own input: rule the kernels in or out at the op level.
            var opLevel = result.exitCode() == Main.DIVERGENCE && !noOps ? OpLevel.check() : null;
            if (json) out.println(opLevel == null ? BisectReport.json(result) : OpLevel.addTo(BisectReport.json(result), opLevel));
            else {
                out.print(BisectReport.terminal(result, Terminal.colourStdout()));
                if (opLevel != null) out.print(opLevel.terminal());
            }
            out.flush();
            if (html != null) HtmlFile.write(html, BisectReport.html(result), spec, json);
            return result.exitCode();
        }
    }
}
