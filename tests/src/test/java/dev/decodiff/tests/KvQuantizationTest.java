package dev.decodiff.tests;

import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.engine.KvType;
import dev.decodiff.harness.compare.Comparison;
import dev.decodiff.harness.compare.ToleranceProfile;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.arch.gemma4.LiveCandidate;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Quantized KV caches against the transformers reference: the prefill stays exact (new tokens are attended in
 * f32), decode drifts in the order of the formats' precision, and the first drift is where the cache is first
 * read back (step 1, layer 0, attn.k_read).
 */
class KvQuantizationTest {
    private static double worstLogits(Gemma4Model model, KvType k, KvType v, int[] firstStepOut, String[] firstPointOut) {
        var dir = ReferenceCases.repoRoot().resolve("reference-dumps/gemma4-tiny/long");
        var ref = DumpReader.open(dir);
        try (var live = LiveCandidate.forPoints(model, EngineOptions.defaults().withKvTypes(k, v), ref.manifest(), ref.allPoints(), false)) {
            var res = Comparison.run(ref, live, new Comparison.Options(ToleranceProfile.defaults(), false, null));
            double worst = 0;
            for (var c : res.cells()) if (c.point().equals("logits")) {
                if (c.step() == 0) assertThat(c.relL2()).as("prefill logits with %s/%s", k, v).isLessThan(1e-5);
                worst = Math.max(worst, c.relL2());
            }
            if (res.firstDivergence() != null) {
                firstStepOut[0] = res.firstDivergence().step();
                firstPointOut[0] = res.firstDivergence().point();
            }
            return worst;
        }
    }

    @Test
    void driftGrowsAsPrecisionFallsAndStartsWhereTheCacheIsFirstRead() {
        try (var model = Gemma4Model.load(ReferenceCases.repoRoot().resolve("checkpoints/gemma4-tiny"))) {
            int[] step = new int[1];
            String[] point = new String[1];
            double bf16 = worstLogits(model, KvType.BF16, KvType.BF16, step, point);
            double q8 = worstLogits(model, KvType.Q8_0, KvType.Q8_0, step, point);
            assertThat(step[0]).isEqualTo(1);
            assertThat(point[0]).isEqualTo("layers.0.attn.k_read");
            double q4 = worstLogits(model, KvType.Q4_0, KvType.Q4_0, step, point);
            assertThat(bf16).isBetween(1e-4, 3e-2);
            assertThat(q8).isGreaterThan(bf16).isLessThan(0.1);
            assertThat(q4).isGreaterThan(q8).isLessThan(1.0);
        }
    }
}
