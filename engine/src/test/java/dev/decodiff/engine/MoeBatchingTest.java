package dev.decodiff.engine;

import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A prefill multiplies every expert by all the tokens routed to it in one GEMM; a decode step routes one token. The
 * two must give each token the same bits (the GEMM's per-token sums are the matvec's, and each token adds its experts
 * in index order either way). The transformers dumps hold both to the reference (GoldenTokenTest, CompareEndToEndTest).
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

    @Test
    void aBatchedPrefillGivesEveryTokenTheBitsOfDecodingItAlone() {
        int[] prompt = {2, 105, 2364, 107, 818, 5279, 529, 9405, 563, 236881, 106, 107, 105, 4368, 107, 3048, 659};
        try (var model = Gemma4Model.load(MOE)) {
            int vocab = model.config().vocabSize();
            for (int i = 0; i < prompt.length; i++) prompt[i] %= vocab;
            var batched = new MoeOutputs();
            model.newSession(EngineOptions.defaults().withProbe(batched)).forward(prompt);
            var alone = new MoeOutputs();
            var session = model.newSession(EngineOptions.defaults().withProbe(alone));
            for (int id : prompt) session.forward(new int[]{id});

            assertThat(batched.rows).hasSize(model.config().numLayers() * prompt.length);
            assertThat(alone.rows.keySet()).isEqualTo(batched.rows.keySet());
            for (var e : batched.rows.entrySet())
                assertThat(alone.rows.get(e.getKey())).as(e.getKey()).containsExactly(e.getValue());
        }
    }
}
