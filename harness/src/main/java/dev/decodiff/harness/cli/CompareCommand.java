package dev.decodiff.harness.cli;

import dev.decodiff.harness.live.ObserverCheck;
import dev.decodiff.harness.OutputPaths;
import dev.decodiff.harness.PartClock;
import dev.decodiff.engine.arch.Architectures;
import dev.decodiff.engine.arch.LoadedModel;
import dev.decodiff.harness.live.ArchitectureCandidate;
import dev.decodiff.harness.arch.ArchitectureSupports;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.compare.Comparison;
import dev.decodiff.harness.compare.ComparisonResult;
import dev.decodiff.harness.compare.ToleranceProfile;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.arch.gemma4.LiveCandidate;
import dev.decodiff.harness.llamacpp.LlamaCppCandidate;
import dev.decodiff.harness.report.HtmlReport;
import dev.decodiff.harness.report.JsonReport;
import dev.decodiff.harness.report.ProgressBar;
import dev.decodiff.harness.report.Terminal;
import dev.decodiff.harness.report.TerminalReport;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Spec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.concurrent.Callable;

@Command(name = "compare", mixinStandardHelpOptions = true,
        description = {"Compares a candidate against a reference dump, cell by cell (step × capture point), and names the first divergence.",
                "Without CANDIDATE the engine runs live, teacher-forced on the reference's tokens, and the observer effect of the probes is checked."},
        footer = {"", "Local attribution: each cell's op is recomputed from the candidate's own inputs with the reference's checkpoint (found"
                        + " by its hashes, or --model for two dumps); drift inherited from upstream is never the finding, and rounding a"
                        + " named precision effect reproduces (GELU through an fp16 table, an f16 cache, …) or that lies inside the rounding"
                        + " envelope of the candidate's precision class (bf16, fp16; below the op's detection floor) is verdict precision, exit 0"
                        + " (--exact: exit 1). The divergence is the first op no effect explains, or the first cell over tolerance that no named"
                        + " effect accounts for. The reference's own ops are recomputed from its own inputs too: where decodiff's description"
                        + " of the model does not reproduce them (within the reference's stated dtype), the verdict is reference_disagrees, exit 4.",
                "Exit codes: 0 match or precision, 1 divergence, 3 incomplete, 4 the reference disagrees with decodiff's description of the model,"
                        + " 2 bad input or usage. Incomplete: every compared cell agrees but not every"
                        + " step and point of the reference was compared, the candidate has steps the reference lacks (a reference cut"
                        + " short?), or a dump lacks its completeness mark. Points only the candidate holds are listed, not held against"
                        + " the verdict; points a candidate left out with dump --points are excluded, and the report says so.",
                "Examples:",
                "  decodiff compare                                   # bundled default case, live engine",
                "  decodiff compare reference-dumps/gemma4-tiny/long out/mine --json",
                "  decodiff compare --fault k-eq-v-rotated-keys --html report.html",
                "  decodiff compare --engine llama.cpp                # llama.cpp on the same case (docs/engines/llama.cpp.md)"})
final class CompareCommand implements Callable<Integer> {
    @Mixin
    ReferenceArgs referenceArgs = new ReferenceArgs();

    @Parameters(index = "1", arity = "0..1", paramLabel = "CANDIDATE",
            description = "Candidate dump folder. Omit to run the engine live.")
    Path candidate;

    @Option(names = "--near-tie", paramLabel = "T",
            description = "A token flip where the reference's top-2 margin is below T logits is a near-tie, not a failure (default ${DEFAULT-VALUE}).",
            defaultValue = "" + ToleranceProfile.DEFAULT_NEAR_TIE)
    double nearTie;

    @Mixin
    OutputArgs output = new OutputArgs();

    @Mixin
    EngineFlags engine = new EngineFlags();

    @Mixin
    MaxPositions maxPositions = new MaxPositions();

    @picocli.CommandLine.Mixin
    LlamaCppFlags llamaCpp = new LlamaCppFlags();

    @Option(names = "--exact", description = {"Fail (exit 1) on precision effects too: a candidate whose every difference is its own named rounding",
            "(verdict precision, exit 0 by default) then fails like a divergence."})
    boolean exact;

    @Option(names = "--no-attribution", description = "Judge by accumulated error alone: the first cell over tolerance is the divergence, with no local attribution.")
    boolean noAttribution;

    @Option(names = "--no-observer-check", description = "Live run only: skip the probe-free run that checks the probes change nothing.")
    boolean noObserverCheck;

    @Option(names = "--full-observer-check", description = "Live run only: re-run every step whole without probes. By default a step longer than "
            + ObserverCheck.REPLAYED + " positions (a long prompt) re-runs only its last " + ObserverCheck.REPLAYED + " without probes, resumed from the probed "
            + "pass's own keys and values of the earlier ones, so the prompt is not computed twice; an effect of the probes confined to those earlier "
            + "positions' values is then not seen (the report says which positions were re-run).")
    boolean fullObserverCheck;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() {
        try (var part = PartClock.enter("other")) {
            return compare();
        }
    }

    private int compare() {
        NumericOptions.finiteAtLeast("--near-tie", nearTie, 0);
        Path refDir = referenceArgs.dir();
        output.checkTargets(OutputPaths.withBundledData(refDir, candidate, referenceArgs.model()));
        if (noObserverCheck && fullObserverCheck) throw new BadInputException("--no-observer-check and --full-observer-check contradict each other; give one");
        if (fullObserverCheck && (candidate != null || llamaCpp.isLlamaCpp()))
            throw new BadInputException("--full-observer-check applies to a live run of decodiff's engine; drop it"
                    + (candidate != null ? ", or drop CANDIDATE to run the engine" : " for --engine llama.cpp"));
        var ref = referenceArgs.open();
        var profile = referenceArgs.profile(ref);
        if (spec.commandLine().getParseResult().hasMatchedOption("--near-tie")) profile = profile.withNearTie(nearTie);
        ComparisonResult result;
        boolean viaLlamaCpp = llamaCpp.isLlamaCpp();
        if (candidate != null) {
            if (!engine.isDefault() || viaLlamaCpp)
                throw new BadInputException("--fault, --kv-cache, --matmul and --engine apply to a live run; drop them, or drop CANDIDATE to run the engine");
            var cand = DumpReader.openCandidate(candidate);
            var notes = Comparison.checkIdentity(ref.manifest(), ref.manifestFile(), cand.manifest(), cand.manifestFile(), referenceArgs.allowMismatch());
            var located = noAttribution ? null : AttributionModel.locate(referenceArgs, ref, notes);
            try (var bar = new ProgressBar("comparing", ref.stepCount()); var m = located == null ? null : Architectures.load(located)) {
                var opt = new Comparison.Options(profile, referenceArgs.allowMismatch(), bar::update);
                var a = m == null ? null : attribution(m, true, null);
                if (a != null) opt = opt.withAttribution(a, exact);
                else if (m != null) notes.add(noAttribution(m));
                result = Comparison.run(ref, Comparison.dumpSource(cand), opt, notes);
            }
        } else if (viaLlamaCpp) {
            boolean profileGiven = referenceArgs.tolerance != null;
            result = llamaCpp(ref, profile, profileGiven);
        } else {
            result = live(ref, profile);
        }
        var r = result;
        try (var part = PartClock.enter("report")) {
            output.deliver(spec, () -> JsonReport.render(r), () -> TerminalReport.render(r, Terminal.colourStdout()), () -> HtmlReport.render(r));
        }
        return result.exitCode();
    }

    /** llama.cpp on the reference's checkpoint (as GGUF), teacher-forced; half-precision weights are judged by the bf16 profile. */
    private ComparisonResult llamaCpp(DumpReader ref, ToleranceProfile profile, boolean profileGiven) {
        var notes = new ArrayList<String>();
        var located = referenceArgs.locateModel(ref);
        if (located.note() != null) notes.add(located.note());
        var options = llamaCpp.options(engine, ref.manifest().tokens().size());
        Path gguf = llamaCpp.resolveGguf(located.dir(), referenceArgs.allowMismatch());
        try (var source = LlamaCppCandidate.open(gguf, llamaCpp.describeSource(gguf, located.dir()), options, ref.manifest(),
                ref.allPoints(), !noObserverCheck);
             var bar = new ProgressBar("running llama.cpp", ref.stepCount())) {
            if (!profileGiven && ToleranceProfile.isHalfPrecision(source.weightDtype())) {
                profile = ToleranceProfile.bf16().withNearTie(profile.nearTie());
                notes.add("llama.cpp runs " + source.weightDtype() + " weights: judged by the bf16 tolerance profile");
            }
            var opt = new Comparison.Options(profile, referenceArgs.allowMismatch(), bar::update);
            if (located.note() != null && !noAttribution) notes.add(AttributionModel.OFF_OTHER_MODEL);
            if (noAttribution || located.note() != null) return Comparison.run(ref, source, opt, notes);
            try (var m = Architectures.load(located.dir())) {
                var a = attribution(m, true, gguf);
                if (a == null) {
                    notes.add(noAttribution(m));
                    return Comparison.run(ref, source, opt, notes);
                }
                notes.addAll(a.notes());
                return Comparison.run(ref, source, opt.withAttribution(a, exact), notes);
            }
        }
    }

    /**
     * Local attribution over a loaded model, by its architecture's plug-in. {@code gguf}: the GGUF llama.cpp runs, whose
     * stored matrices may become a precision hypothesis.
     */
    static dev.decodiff.harness.compare.attribution.OpAttribution attribution(LoadedModel m, boolean everyCell, Path gguf) {
        return ArchitectureSupports.of(m.architecture()).attribution(m, everyCell, gguf);
    }

    /**
     * Said where an architecture has no op description for attribution: nothing over tolerance can then be accounted
     * for as precision, so every such cell is a divergence.
     */
    static String noAttribution(LoadedModel m) {
        return "no local attribution for " + m.architecture().name() + " (its ops are not described for recomputation):"
                + " each cell is judged by its accumulated error, and every cell over tolerance is a divergence";
    }

    /** Another architecture's engine (through the plug-in seam), live and teacher-forced, its own ops attributed where a cell is over tolerance. */
    private ComparisonResult liveArchitecture(DumpReader ref, ToleranceProfile profile, Path modelDir, java.util.List<String> notes, boolean otherModel) {
        if (!engine.onlyFaults())
            throw new BadInputException("--kv-cache and --matmul apply to Gemma 4's engine; drop them for " + modelDir);
        var arch = Architectures.of(modelDir);
        var faults = engine.faultIds(arch, modelDir);
        if (fullObserverCheck) notes.add("--full-observer-check: this engine's observer check always re-runs every step whole");
        LoadedModel loaded;
        try (var part = PartClock.enter("load")) {
            loaded = Architectures.load(modelDir);
        }
        try (var m = loaded) {
            var rm = ref.manifest();
            maxPositions.check(modelDir.resolve("config.json"), m.maxPositions(), (long) rm.promptLength() + ref.stepCount() - 1,
                    "the reference's prompt (" + rm.promptLength() + " tokens) and " + ref.stepCount() + " steps", "compare a shorter reference");
            var points = ref.allPoints();
            try (var bar = new ProgressBar("running " + modelDir.getFileName(), ref.stepCount());
                 var source = new ArchitectureCandidate(m, faults, rm, points::contains, !noObserverCheck)) {
                var opt = new Comparison.Options(profile, referenceArgs.allowMismatch(), bar::update);
                // decodiff's own forward is these ops: attribute only what is over tolerance
                var a = noAttribution || otherModel ? null : attribution(m, false, null);
                if (a != null) opt = opt.withAttribution(a, exact);
                else if (!noAttribution && otherModel) notes.add(AttributionModel.OFF_OTHER_MODEL);
                else if (!noAttribution) notes.add(noAttribution(m));
                return Comparison.run(ref, source, opt, notes);
            }
        }
    }

    private ComparisonResult live(DumpReader ref, ToleranceProfile profile) {
        var notes = new ArrayList<String>();
        dev.decodiff.harness.live.ModelLocator.Located located;
        try (var part = PartClock.enter("checkpoint_identity")) {
            located = referenceArgs.locateModel(ref);
        }
        if (located.note() != null) notes.add(located.note());
        Path modelDir = located.dir();
        var tunable = ArchitectureSupports.of(Architectures.of(modelDir)).tunableEngine();
        if (tunable.isEmpty()) return liveArchitecture(ref, profile, modelDir, notes, located.note() != null);
        var engineRun = tunable.get();
        var options = engine.options();
        LoadedModel loaded;
        try (var part = PartClock.enter("load")) {
            loaded = engineRun.load(modelDir, ref.stepCount() - 1L); // the steps after the prompt decode a token each
        }
        try (var m = loaded) {
            var rm = ref.manifest();
            maxPositions.check(modelDir.resolve("config.json"), m.maxPositions(), (long) rm.promptLength() + ref.stepCount() - 1,
                    "the reference's prompt (" + rm.promptLength() + " tokens) and " + ref.stepCount() + " steps", "compare a shorter reference");
            try (var bar = new ProgressBar("running " + modelDir.getFileName(), ref.stepCount());
                 var source = engineRun.live(m, options, rm, ref.allPoints(), noObserverCheck ? ObserverCheck.OFF
                         : fullObserverCheck ? ObserverCheck.WHOLE : ObserverCheck.LAST_POSITIONS)) {
                var opt = new Comparison.Options(profile, referenceArgs.allowMismatch(), bar::update);
                // decodiff's own forward is these ops: attribute only what is over tolerance
                if (!noAttribution && located.note() == null) opt = opt.withAttribution(attribution(m, false, null), exact);
                else if (!noAttribution) notes.add(AttributionModel.OFF_OTHER_MODEL);
                return Comparison.run(ref, source, opt, notes);
            }
        }
    }
}
