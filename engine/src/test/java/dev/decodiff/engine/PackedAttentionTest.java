package dev.decodiff.engine;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Attention over an encoded cache (bf16, q8_0, q4_0) reads the history packed, widening it in registers; before, each
 * step decoded the history into an f32 copy and attended over that. The two must give the same bits — through
 * prefill, decode past a sliding window's wrap, KV-shared layers and k_eq_v layers — and differ from an f32 cache
 * (so the encoded rows were really read). Drift of each type against transformers: KvQuantizationTest.
 */
class PackedAttentionTest {
    private static final String PROPERTY = "decodiff.packedAttention";

    /** Logits of every step: a 13-token prefill, then 14 single-token steps (the sliding window is 8). */
    private static float[][] decode(Path checkpoint, KvType k, KvType v, boolean packed) {
        String before = System.getProperty(PROPERTY);
        System.setProperty(PROPERTY, Boolean.toString(packed));
        try (var model = Gemma4Model.load(checkpoint)) {
            var session = model.newSession(EngineOptions.defaults().withKvTypes(k, v));
            int vocab = model.config().vocabSize();
            int[] prompt = new int[13];
            for (int i = 0; i < prompt.length; i++) prompt[i] = (17 * i + 5) % vocab;
            float[][] logits = new float[15][];
            logits[0] = session.forward(prompt);
            for (int s = 1; s < logits.length; s++) logits[s] = session.forward(new int[]{Sampler.argmax(logits[s - 1])});
            return logits;
        } finally {
            if (before == null) System.clearProperty(PROPERTY);
            else System.setProperty(PROPERTY, before);
        }
    }

    @ParameterizedTest
    @CsvSource({"gemma4-tiny,q8_0,q8_0", "gemma4-tiny,q4_0,q4_0", "gemma4-tiny,bf16,bf16", "gemma4-tiny,q8_0,q4_0",
            "gemma4-tiny,f32,q4_0", "gemma4-tiny,bf16,f32", "gemma4-tiny-ple,q4_0,q8_0", "gemma4-tiny-moe,q8_0,bf16"})
    void readingTheCachePackedGivesTheBitsOfDecodingItFirst(String name, String k, String v) {
        var checkpoint = Path.of("..", "checkpoints", name);
        var kt = KvType.byId(k);
        var vt = KvType.byId(v);
        float[][] packed = decode(checkpoint, kt, vt, true);
        float[][] decoded = decode(checkpoint, kt, vt, false);
        for (int s = 0; s < packed.length; s++) assertThat(packed[s]).as("step %d", s).containsExactly(decoded[s]);

        float[][] exact = decode(checkpoint, KvType.F32, KvType.F32, true);
        assertThat(exact[0]).as("prefill attends this step's rows in f32").containsExactly(packed[0]);
        assertThat(exact[exact.length - 1]).as("decode reads the encoded history").isNotEqualTo(packed[packed.length - 1]);
    }
}
