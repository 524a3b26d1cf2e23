package dev.decodiff.harness.testing;

import dev.decodiff.harness.compare.Comparison;
import dev.decodiff.harness.compare.ComparisonResult;
import dev.decodiff.harness.compare.ToleranceProfile;
import dev.decodiff.harness.arch.ArchitectureSupports;
import dev.decodiff.harness.compare.CandidateSource;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.live.ArchitectureCandidate;
import dev.decodiff.harness.live.ObserverCheck;
import dev.decodiff.llamacpp.ffi.LlamaContext;
import dev.decodiff.harness.report.VerdictText;
import org.assertj.core.api.AbstractAssert;

import java.nio.file.Path;
import java.util.List;

/**
 * AssertJ assertions on an engine run against a reference dump. A failure's message is decodiff's verdict
 * paragraph: where the run diverged, how far, what was still clean, and the diagnosis.
 */
public final class EngineRunAssert extends AbstractAssert<EngineRunAssert, EngineRun> {
    /** null: the profile the reference calls for (the CLI's rule: bf16 noise floor for a bfloat16 reference, else fp32). */
    private ToleranceProfile profile;
    private boolean observerCheck = true;
    private ComparisonResult last;

    EngineRunAssert(EngineRun actual) { super(actual, EngineRunAssert.class); }

    /** Judges with this tolerance profile instead of the one the reference's dtype calls for. */
    public EngineRunAssert withTolerances(ToleranceProfile p) {
        this.profile = p;
        return this;
    }

    /** Skips the second, probe-free run that proves the probes change nothing (halves the cost). */
    public EngineRunAssert withoutObserverCheck() {
        this.observerCheck = false;
        return this;
    }

    public EngineRunAssert matchesReference(Path dump) { return matchesReference(ReferenceDump.open(dump)); }

    /** Every cell within tolerance, no token flip beyond a near-tie, no observer effect. */
    public EngineRunAssert matchesReference(ReferenceDump ref) {
        isNotNull();
        var r = compare(ref);
        if (!r.matches()) failWithMessage("%s", VerdictText.paragraph(r));
        return this;
    }

    /** The run diverges, first at exactly this (step, point): how a planted fault must be found. */
    public EngineRunAssert divergesFrom(ReferenceDump ref, int step, String point) {
        isNotNull();
        var r = compare(ref);
        var fd = r.firstDivergence();
        if (fd == null) failWithMessage("expected a divergence at step %d, %s, but: %s", step, point, VerdictText.paragraph(r));
        else if (fd.step() != step || !fd.point().equals(point))
            failWithMessage("expected the first divergence at step %d, %s, but: %s", step, point, VerdictText.paragraph(r));
        return this;
    }

    private CandidateSource source(DumpReader reader) {
        var l = actual.llamaCpp();
        if (l == null) return live(reader);
        int tokens = reader.manifest().tokens().size();
        var o = l.options() != null ? l.options() : LlamaContext.Options.exact(LlamaContext.Options.lengthFor(tokens));
        return dev.decodiff.harness.llamacpp.LlamaCppCandidate.open(l.gguf(), l.gguf().toString(), o, reader.manifest(), reader.allPoints(), observerCheck);
    }

    /**
     * The run's own engine, teacher-forced: the family's tunable engine where it has one (it honours the engine
     * options), else the model through the plug-in seam with its catalog faults.
     */
    private CandidateSource live(DumpReader reader) {
        var model = actual.model();
        var tunable = ArchitectureSupports.of(model.architecture()).tunableEngine();
        if (tunable.isPresent() && actual.options() != null)
            return tunable.get().live(model, actual.engineOptions(), reader.manifest(), reader.allPoints(),
                    observerCheck ? ObserverCheck.LAST_POSITIONS : ObserverCheck.OFF);
        var points = reader.allPoints();
        return new ArchitectureCandidate(model, List.copyOf(actual.faults()), reader.manifest(), points::contains, observerCheck);
    }

    /** The full result of the last comparison, for further checks. */
    public ComparisonResult result() { return last; }

    private ComparisonResult compare(ReferenceDump ref) {
        var reader = ref.reader();
        try (var src = source(reader)) {
            var p = profile != null ? profile : ToleranceProfile.forReference(reader.manifest().producer());
            last = Comparison.run(reader, src, new Comparison.Options(p, false, null));
        }
        return last;
    }
}
