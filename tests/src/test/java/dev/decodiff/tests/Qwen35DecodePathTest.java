package dev.decodiff.tests;

import dev.decodiff.engine.Probe;
import dev.decodiff.engine.qwen35.Qwen35Model;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.Arrays;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Decode's fused paths give the op-by-op path's bits. A session with no probe runs each Gated DeltaNet layer's decode
 * token as one fused call (Qwen35Ops.linearStep) and attention over its block copy of the keys; a probe that wants
 * every point runs the layers op by op, each point offered where it is computed; one that hands the keys read back
 * (a replacement by the same values) makes the session rebuild its block copy every step. All three give the same
 * logits, bit for bit, at every step of a greedy decode (the dense and the MoE tiny checkpoints, two value heads per
 * key head).
 */
class Qwen35DecodePathTest {
    @ParameterizedTest
    @ValueSource(strings = {"qwen35-tiny", "qwen35-tiny-moe"})
    void fusedDecodeHasTheOpByOpBits(String checkpoint) {
        try (var model = Qwen35Model.load(ReferenceCases.repoRoot().resolve("checkpoints").resolve(checkpoint))) {
            Probe everything = (point, shape, data) -> null;
            Probe keysBack = new Probe() {
                @Override public boolean wants(String point) { return point.endsWith("attn.k_read"); }

                @Override public float[] capture(String point, int[] shape, float[] data) { return data; }
            };
            var fused = model.newSession(null);
            var opByOp = model.newSession(everything);
            var rebuilt = model.newSession(keysBack);
            int vocab = model.config().vocabSize();
            int[] prompt = new int[19];
            for (int i = 0; i < prompt.length; i++) prompt[i] = (i * 37 + 11) % vocab;
            float[] a = fused.forward(prompt), b = opByOp.forward(prompt), c = rebuilt.forward(prompt);
            for (int step = 0; step < 40; step++) {
                assertThat(bits(b)).as("op by op, step %d", step).isEqualTo(bits(a));
                assertThat(bits(c)).as("keys rebuilt, step %d", step).isEqualTo(bits(a));
                int next = argmax(a);
                a = fused.forward(new int[]{next});
                b = opByOp.forward(new int[]{next});
                c = rebuilt.forward(new int[]{next});
            }
        }
    }

    private static int argmax(float[] v) {
        int best = 0;
        for (int j = 1; j < v.length; j++) if (v[j] > v[best]) best = j;
        return best;
    }

    private static int[] bits(float[] a) {
        int[] b = new int[a.length];
        for (int i = 0; i < a.length; i++) b[i] = Float.floatToRawIntBits(a[i]);
        return Arrays.copyOf(b, b.length);
    }
}
