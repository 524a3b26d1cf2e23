package dev.decodiff.harness.cli;

import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.compare.Comparison;
import dev.decodiff.harness.compare.ComparisonResult;
import dev.decodiff.harness.compare.ToleranceProfile;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.live.LiveCandidate;
import dev.decodiff.harness.live.ModelLocator;
import dev.decodiff.harness.report.HtmlReport;
import dev.decodiff.harness.report.JsonReport;
import dev.decodiff.harness.report.ProgressBar;
import dev.decodiff.harness.report.Terminal;
import dev.decodiff.harness.report.TerminalReport;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.concurrent.Callable;

@Command(name = "compare", mixinStandardHelpOptions = true,
        description = {"Compares a candidate against a reference dump, cell by cell (step × capture point), and names the first divergence.",
                "Without CANDIDATE the engine runs live, teacher-forced on the reference's tokens, and the observer effect of the probes is checked."},
        footer = {"", "Exit codes: 0 match, 1 divergence, 2 bad input or usage, 3 incomplete: every compared cell agrees but not every",
                "step and point of the reference was compared, the candidate holds some the reference lacks, or a dump lacks its",
                "completeness mark. Points a dump left out with dump --points are excluded, and the report says so.",
                "Examples:",
                "  decodiff compare                                   # bundled default case, live engine",
                "  decodiff compare reference-dumps/gemma4-tiny/long out/mine --json",
                "  decodiff compare --fault k-eq-v-rotated-keys --html report.html"})
final class CompareCommand implements Callable<Integer> {
    @Parameters(index = "0", arity = "0..1", paramLabel = "REFERENCE",
            description = "Reference dump folder (default: the bundled case " + Home.DEFAULT_CASE + ").")
    Path reference;

    @Parameters(index = "1", arity = "0..1", paramLabel = "CANDIDATE",
            description = "Candidate dump folder. Omit to run the engine live.")
    Path candidate;

    @Option(names = "--model", paramLabel = "DIR",
            description = "Checkpoint for the live run (default: the bundled checkpoint whose config and weights hashes match the reference).")
    Path model;

    @Option(names = "--tolerance", paramLabel = "FILE", description = "JSON tolerance profile overriding the defaults (docs/tolerances.md).")
    Path tolerance;

    @Option(names = "--near-tie", paramLabel = "T",
            description = "A token flip where the reference's top-2 margin is below T logits is a near-tie, not a failure (default ${DEFAULT-VALUE}).",
            defaultValue = "" + ToleranceProfile.DEFAULT_NEAR_TIE)
    double nearTie;

    @Option(names = "--json", description = "Print the machine-readable verdict (JSON) on stdout instead of the terminal report.")
    boolean json;

    @Option(names = "--html", paramLabel = "FILE", description = "Also write a self-contained HTML report to FILE.")
    Path html;

    @Option(names = "--allow-mismatch", description = "Compare even when the two sides come from different checkpoints, tokens or dtypes.")
    boolean allowMismatch;

    @picocli.CommandLine.Mixin
    EngineFlags engine = new EngineFlags();

    @Option(names = "--no-observer-check", description = "Live run only: skip the second, probe-free run that checks the probes change nothing.")
    boolean noObserverCheck;

    @picocli.CommandLine.Spec
    picocli.CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() {
        HtmlFile.checkTarget(html);
        Path refDir = reference != null ? reference : Home.defaultReference();
        if (reference == null && !Files.exists(refDir))
            throw new BadInputException(refDir, "the bundled default case is missing; pass a REFERENCE dump folder");
        var ref = DumpReader.open(refDir);
        var producer = ref.manifest().producer();
        boolean halfRef = producer != null && ToleranceProfile.isHalfPrecision(producer.dtype());
        var profile = tolerance != null ? ToleranceProfile.load(tolerance) : halfRef ? ToleranceProfile.bf16() : ToleranceProfile.defaults();
        if (spec.commandLine().getParseResult().hasMatchedOption("--near-tie")) profile = profile.withNearTie(nearTie);
        if (nearTie < 0) throw new BadInputException("--near-tie must be ≥ 0, got " + nearTie);
        ComparisonResult result;
        if (candidate != null) {
            if (model != null || !engine.isDefault())
                throw new BadInputException("--model, --fault and --kv-cache apply to a live run; drop them, or drop CANDIDATE to run the engine");
            var cand = DumpReader.open(candidate);
            var notes = Comparison.checkIdentity(ref.manifest(), ref.manifestFile(), cand.manifest(), cand.manifestFile(), allowMismatch);
            try (var bar = new ProgressBar("comparing", ref.stepCount())) {
                result = Comparison.run(ref, Comparison.dumpSource(cand), new Comparison.Options(profile, allowMismatch, bar::update), notes);
            }
        } else {
            result = live(ref, profile);
        }
        var out = spec.commandLine().getOut();
        if (json) out.println(JsonReport.render(result));
        else out.print(TerminalReport.render(result, Terminal.colourStdout()));
        out.flush();
        if (html != null) HtmlFile.write(html, HtmlReport.render(result), spec, json);
        return result.exitCode();
    }

    private ComparisonResult live(DumpReader ref, ToleranceProfile profile) {
        var notes = new ArrayList<String>();
        var located = ModelLocator.locate(model, Home.get(), ref.manifest(), ref.manifestFile(), allowMismatch);
        if (located.note() != null) notes.add(located.note());
        Path modelDir = located.dir();
        var options = engine.options();
        try (var m = Gemma4Model.load(modelDir);
             var bar = new ProgressBar("running " + modelDir.getFileName(), ref.stepCount());
             var source = LiveCandidate.forPoints(m, options, ref.manifest(), ref.allPoints(), !noObserverCheck)) {
            return Comparison.run(ref, source, new Comparison.Options(profile, allowMismatch, bar::update), notes);
        }
    }
}
