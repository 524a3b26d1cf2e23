package dev.decodiff.engine;

import dev.decodiff.metal.MatmulPrecision;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A prefill multiplies every expert by all the tokens routed to it in one GEMM; a decode step routes one token. On the
 * FMA kernels the two must give each token the same bits (the GEMM's per-token sums are the matvec's, and each token
 * adds its experts in index order either way). The default GEMM of a prefill runs on AMX tiles where the CPU has them,
 * which sum in another order: there each token agrees with decoding it alone to fp32 rounding. The transformers dumps
 * hold both to the reference (GoldenTokenTest, CompareEndToEndTest).
 */
class MoeBatchingTest {
    private static final Path MOE = Path.of("..", "checkpoints", "gemma4-tiny-moe");

    /** Captures every layer's moe.out, keyed by "layer@position". */
    private static final class MoeOutputs implements Probe {
        final Map<String, float[]> rows = new HashMap<>();
        int start;

        @Override public boolean wants(String point) { return point.endsWith(".moe.out"); }

        @Override public void beginStep(int step, int start, int length) { this.start = start; }

        @Override
        public float[] capture(String point, int[] shape, float[] data) {
            int h = shape[1];
            for (int t = 0; t < shape[0]; t++) {
                float[] row = new float[h];
                System.arraycopy(data, t * h, row, 0, h);
                rows.put(point + "@" + (start + t), row);
            }
            return null;
        }
    }

    private static final int[] PROMPT = {2, 105, 2364, 107, 818, 5279, 529, 9405, 563, 236881, 106, 107, 105, 4368, 107, 3048, 659};

    /** moe.out of every layer and position: the prompt in one prefill, and the prompt decoded a token at a time. */
    private static MoeOutputs[] batchedAndAlone(Gemma4Model model, EngineOptions options) {
        int[] prompt = PROMPT.clone();
        for (int i = 0; i < prompt.length; i++) prompt[i] %= model.config().vocabSize();
        var batched = new MoeOutputs();
        model.newSession(options.withProbe(batched)).forward(prompt);
        var alone = new MoeOutputs();
        var session = model.newSession(options.withProbe(alone));
        for (int id : prompt) session.forward(new int[]{id});
        assertThat(batched.rows).hasSize(model.config().numLayers() * prompt.length);
        assertThat(alone.rows.keySet()).isEqualTo(batched.rows.keySet());
        return new MoeOutputs[]{batched, alone};
    }

    @Test
    void aBatchedPrefillGivesEveryTokenTheBitsOfDecodingItAlone() {
        try (var model = Gemma4Model.load(MOE)) {
            var runs = batchedAndAlone(model, EngineOptions.defaults().withMatmul(MatmulPrecision.FP32_FMA));
            for (var e : runs[0].rows.entrySet())
                assertThat(runs[1].rows.get(e.getKey())).as(e.getKey()).containsExactly(e.getValue());
        }
    }

    @Test
    void theDefaultPrefillAgreesWithDecodingEachTokenAloneToFp32Rounding() {
        try (var model = Gemma4Model.load(MOE)) {
            var runs = batchedAndAlone(model, EngineOptions.defaults());
            for (var e : runs[0].rows.entrySet()) {
                float[] a = runs[1].rows.get(e.getKey()), b = e.getValue();
                double diff = 0, norm = 0;
                for (int i = 0; i < a.length; i++) {
                    diff += (a[i] - (double) b[i]) * (a[i] - b[i]);
                    norm += (double) b[i] * b[i];
                }
                assertThat(Math.sqrt(diff / norm)).as(e.getKey()).isLessThan(1e-5);
            }
        }
    }
}
