package dev.decodiff.llamacpp.gguf;

import dev.decodiff.engine.Gemma4Config;
import dev.decodiff.engine.LayerType;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * What the metadata of a gemma4 GGUF must say for a config, as llama.cpp's loader reads it (llama-model.cpp and
 * models/gemma4.cpp), with every expected value taken from the engine's own reading of config.json.
 */
final class MetadataExpectations {
    private MetadataExpectations() {}

    static void assertMatches(Map<String, GgufValue> m, Gemma4Config c, long contextLength) {
        assertThat(m.get("general.architecture").asString()).isEqualTo("gemma4");
        assertThat(u32(m, "gemma4.block_count")).isEqualTo(c.numLayers());
        assertThat(u32(m, "gemma4.context_length")).isEqualTo(contextLength);
        assertThat(u32(m, "gemma4.embedding_length")).isEqualTo(c.hidden());
        assertThat(u32(m, "gemma4.attention.head_count")).isEqualTo(c.numHeads());
        assertThat(f32(m, "gemma4.attention.layer_norm_rms_epsilon")).isEqualTo(c.rmsNormEps());
        assertThat(f32(m, "gemma4.final_logit_softcapping")).isEqualTo(c.finalLogitSoftcap());
        assertThat(u32(m, "gemma4.attention.sliding_window")).isEqualTo(c.slidingWindow());
        assertThat(u32(m, "gemma4.attention.shared_kv_layers")).isEqualTo(c.numKvSharedLayers());
        assertThat(u32(m, "gemma4.embedding_length_per_layer_input")).isEqualTo(c.pleDim());
        assertThat(f32(m, "gemma4.rope.freq_base")).isEqualTo((float) c.fullRope().theta());
        assertThat(f32(m, "gemma4.rope.freq_base_swa")).isEqualTo((float) c.slidingRope().theta());

        var swa = new ArrayList<Boolean>();
        var kv = new ArrayList<Long>();
        var ff = new ArrayList<Long>();
        long dFull = -1, dSwa = -1;
        for (var l : c.layers()) {
            boolean s = l.type() == LayerType.SLIDING;
            swa.add(s);
            kv.add((long) l.kvHeads());
            ff.add((long) l.intermediate());
            if (s) dSwa = l.headDim(); else dFull = l.headDim();
        }
        assertThat(m.get("gemma4.attention.sliding_window_pattern").asList()).isEqualTo(swa);
        assertThat(perLayer(m, "gemma4.attention.head_count_kv", c.numLayers())).as("KV heads per layer").isEqualTo(kv);
        assertThat(perLayer(m, "gemma4.feed_forward_length", c.numLayers())).as("MLP width per layer").isEqualTo(ff);
        assertThat(u32(m, "gemma4.attention.key_length")).isEqualTo(dFull);
        assertThat(u32(m, "gemma4.attention.value_length")).isEqualTo(dFull);
        assertThat(u32(m, "gemma4.attention.key_length_swa")).isEqualTo(dSwa);
        assertThat(u32(m, "gemma4.attention.value_length_swa")).isEqualTo(dSwa);
        assertThat(u32(m, "gemma4.rope.dimension_count")).as("full layers rotate through rope_freqs over the whole head").isEqualTo(dFull);
        assertThat(u32(m, "gemma4.rope.dimension_count_swa")).isEqualTo(dSwa);
        if (c.moe()) {
            assertThat(u32(m, "gemma4.expert_count")).isEqualTo(c.numExperts());
            assertThat(u32(m, "gemma4.expert_used_count")).isEqualTo(c.topKExperts());
            assertThat(u32(m, "gemma4.expert_feed_forward_length")).isEqualTo(c.moeIntermediate());
        } else {
            assertThat(m).doesNotContainKeys("gemma4.expert_count", "gemma4.expert_used_count");
        }
    }

    /** A per-layer hparam as llama.cpp's get_key_or_arr reads it: one number for all layers, or an array of them. */
    static List<Long> perLayer(Map<String, GgufValue> m, String key, int layers) {
        var v = m.get(key);
        assertThat(v).as(key).isNotNull();
        if (v.type() == GgufValueType.ARRAY) {
            assertThat(v.itemType().isInteger()).as(key + " items").isTrue();
            assertThat(v.asList()).as(key).hasSize(layers);
            return v.asList().stream().map(o -> (Long) o).toList();
        }
        assertThat(v.type()).as(key).isEqualTo(GgufValueType.UINT32);
        return java.util.Collections.nCopies(layers, v.asLong());
    }

    static long u32(Map<String, GgufValue> m, String key) {
        var v = m.get(key);
        assertThat(v).as(key).isNotNull();
        assertThat(v.type()).as(key).isEqualTo(GgufValueType.UINT32);
        return v.asLong();
    }

    static float f32(Map<String, GgufValue> m, String key) {
        var v = m.get(key);
        assertThat(v).as(key).isNotNull();
        assertThat(v.type()).as(key).isEqualTo(GgufValueType.FLOAT32);
        return (float) v.asDouble();
    }
}
