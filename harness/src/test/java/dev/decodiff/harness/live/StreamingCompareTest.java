package dev.decodiff.harness.live;

import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.Fault;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.harness.compare.CandidateSource;
import dev.decodiff.harness.compare.Comparison;
import dev.decodiff.harness.compare.ComparisonResult;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.dump.StepTensors;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.Set;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A live comparison streams: each tensor is compared as the engine produces it. It must find exactly what the
 * comparison of whole steps finds — every cell's sums to the bit, the same first divergence and diagnosis.
 */
class StreamingCompareTest {
    @TempDir
    static Path home;
    static Path model, dump;

    @BeforeAll
    static void setUp() {
        var c = TinyCase.write(home, home.resolve("case"), 6);
        model = c.model();
        dump = c.dump();
    }

    /** The same live engine, handing over whole steps only (the path a dump takes). */
    record WholeSteps(LiveCandidate live) implements CandidateSource {
        @Override public String describe() { return live.describe(); }
        @Override public int stepCount() { return live.stepCount(); }
        @Override public StepTensors step(int s) { return live.step(s); }
        @Override public String observerEffect() { return live.observerEffect(); }
    }

    @Test
    void streamedAndWholeStepComparisonsAgreeBitForBit() {
        for (var options : new EngineOptions[]{EngineOptions.defaults(), EngineOptions.defaults().withFaults(Set.of(Fault.K_EQ_V_ROTATED_KEYS)),
                EngineOptions.defaults().withFaults(Set.of(Fault.SLIDING_WINDOW_OFF_BY_ONE))}) {
            try (var m = Gemma4Model.load(model)) {
                var ref = DumpReader.open(dump);
                ComparisonResult streamed, whole;
                try (var live = LiveCandidate.forPoints(m, options, ref.manifest(), ref.allPoints(), true)) {
                    streamed = Comparison.run(ref, live, Comparison.Options.defaults());
                }
                try (var live = LiveCandidate.forPoints(m, options, ref.manifest(), ref.allPoints(), true)) {
                    whole = Comparison.run(ref, new WholeSteps(live), Comparison.Options.defaults());
                }
                assertThat(streamed.cells()).hasSameSizeAs(whole.cells()).isNotEmpty();
                for (int i = 0; i < whole.cells().size(); i++) {
                    var a = streamed.cells().get(i);
                    var b = whole.cells().get(i);
                    assertThat(a.point()).isEqualTo(b.point());
                    assertThat(a.step()).isEqualTo(b.step());
                    assertThat(Double.doubleToRawLongBits(a.relL2())).as("%s at step %d", a.point(), a.step()).isEqualTo(Double.doubleToRawLongBits(b.relL2()));
                    assertThat(Double.doubleToRawLongBits(a.cosine())).isEqualTo(Double.doubleToRawLongBits(b.cosine()));
                    assertThat(Double.doubleToRawLongBits(a.maxAbsDiff())).isEqualTo(Double.doubleToRawLongBits(b.maxAbsDiff()));
                    assertThat(a.maxIndex()).isEqualTo(b.maxIndex());
                    assertThat(a.shapeNote()).isEqualTo(b.shapeNote());
                }
                assertThat(streamed.tokens()).isEqualTo(whole.tokens());
                assertThat(streamed.onlyInReference()).isEqualTo(whole.onlyInReference());
                assertThat(streamed.verdict()).isEqualTo(whole.verdict());
                assertThat(streamed.observerEffect()).isEqualTo(whole.observerEffect());
                var fs = streamed.firstDivergence();
                var fw = whole.firstDivergence();
                if (options.faults().isEmpty()) {
                    assertThat(fs).isNull();
                    assertThat(fw).isNull();
                } else {
                    assertThat(fs).as("%s", options.faults()).isNotNull();
                    assertThat(fs.step()).isEqualTo(fw.step());
                    assertThat(fs.point()).isEqualTo(fw.point());
                    assertThat(fs.diagnosis()).isNotNull().isEqualTo(fw.diagnosis());
                    assertThat(fs.upstream().stream().map(c -> c.point() + " " + c.relL2()).toList())
                            .isEqualTo(fw.upstream().stream().map(c -> c.point() + " " + c.relL2()).toList());
                }
            }
        }
    }
}
