package dev.decodiff.engine.llama;

import com.fasterxml.jackson.databind.JsonNode;
import dev.decodiff.engine.CheckpointException;
import dev.decodiff.engine.ConfigFields;

import java.nio.file.Path;
import java.util.List;

/**
 * The configuration of a dense Llama-family decoder (transformers 5.17): llama (Llama 2/3.x), mistral and qwen3 share
 * one forward (RMSNorm, GQA attention with rotate-half RoPE, SwiGLU MLP); qwen3 adds per-head q/k RMSNorm before RoPE.
 * What the engine cannot honour (sliding windows, other RoPE scalings, other activations) is refused with one line.
 *
 * @param ropeScaling the llama3 frequency scaling, or null for the default table
 * @param qkNorm      whether each attention layer RMS-normalises every query and key head (qwen3)
 */
public record LlamaConfig(String modelType, int vocabSize, int hidden, int numLayers, int numHeads, int numKvHeads,
                          int headDim, int intermediate, float rmsNormEps, double ropeTheta, Llama3RopeScaling ropeScaling,
                          boolean attentionBias, boolean mlpBias, boolean qkNorm, boolean tieWordEmbeddings, int maxPositions) {

    public static final String LLAMA = "llama", MISTRAL = "mistral", QWEN3 = "qwen3";
    public static final List<String> MODEL_TYPES = List.of(LLAMA, MISTRAL, QWEN3);

    public static LlamaConfig read(Path file) { return parse(ConfigFields.readRoot(file), file.toString()); }

    public static LlamaConfig parse(JsonNode root, String file) {
        if (root == null || !root.isObject()) throw new CheckpointException(file + ": config.json is not a JSON object");
        String type = root.path("model_type").asText("");
        if (!MODEL_TYPES.contains(type))
            throw new CheckpointException(file + ": model_type '" + type + "' is not a Llama-family model (expected one of " + String.join(", ", MODEL_TYPES) + ")");
        var r = new ConfigFields(root, file, "");
        boolean mistral = type.equals(MISTRAL), qwen3 = type.equals(QWEN3);

        String act = r.str("hidden_act", "silu");
        if (!act.equals("silu")) throw r.bad("hidden_act", "'" + act + "' is not supported; the Llama family's MLP uses silu");
        if (mistral) {
            // MistralConfig's default window is 4096, so an absent key means a sliding window too
            JsonNode sw = root.get("sliding_window");
            if (sw == null) throw r.bad("sliding_window", "is absent, which transformers reads as a 4096-token window; decodiff runs full attention only: write \"sliding_window\": null");
            if (!sw.isNull()) throw r.bad("sliding_window", sw + " is not supported; decodiff runs full attention only: set it to null");
        }
        if (qwen3 && r.bool("use_sliding_window", false))
            throw r.bad("use_sliding_window", "true is not supported; decodiff runs full attention only: set it to false");
        JsonNode lt = root.get("layer_types");
        if (lt != null && lt.isArray())
            for (int i = 0; i < lt.size(); i++)
                if (!lt.get(i).asText("").equals("full_attention"))
                    throw r.bad("layer_types[" + i + "]", "'" + lt.get(i).asText() + "' is not supported; decodiff runs full attention only: make every entry \"full_attention\"");

        int vocab = r.positive("vocab_size", qwen3 ? 151936 : 32000);
        int hidden = r.positive("hidden_size", 4096);
        int L = r.positive("num_hidden_layers", 32);
        int nh = r.positive("num_attention_heads", 32);
        int nkv = r.positive("num_key_value_heads", mistral ? 8 : nh);
        if (nh % nkv != 0) throw r.bad("num_key_value_heads", nkv + " does not divide num_attention_heads " + nh + "; fix one of them");
        Integer hdOpt = r.optInt("head_dim");
        int hd = hdOpt != null ? hdOpt : qwen3 ? 128 : hidden / nh;
        if (hd % 2 != 0) throw r.bad("head_dim", hd + " is odd; rotate-half RoPE pairs the two halves of a head, so it must be even");
        int inter = r.positive("intermediate_size", mistral ? 14336 : qwen3 ? 22016 : 11008);
        float eps = (float) r.num("rms_norm_eps", 1e-6);
        if (!(eps > 0)) throw r.bad("rms_norm_eps", "must be a positive number");
        int maxPos = r.positive("max_position_embeddings", mistral ? 131072 : qwen3 ? 32768 : 2048);
        // MistralAttention and MistralMLP, and Qwen3's MLP, have no bias whatever the config says
        boolean attnBias = !mistral && r.bool("attention_bias", false);
        boolean mlpBias = type.equals(LLAMA) && r.bool("mlp_bias", false);
        boolean tie = r.bool("tie_word_embeddings", false);

        // RoPE: rope_parameters (transformers 5), or the legacy rope_scaling beside a top-level rope_theta
        String key = root.hasNonNull("rope_parameters") ? "rope_parameters" : "rope_scaling";
        JsonNode rp = root.get(key);
        if (rp != null && !rp.isNull() && !rp.isObject()) throw r.bad(key, "is " + rp + "; write an object with rope_type (or null)");
        var rope = rp != null && rp.isObject() ? new ConfigFields(rp, file, key + ".") : null;
        String ropeType = rope == null ? "default" : rope.str("rope_type", rope.str("type", "default"));
        double theta = rope != null && rp.has("rope_theta") ? rope.num("rope_theta", 10000.0) : r.num("rope_theta", 10000.0);
        if (!(theta > 0)) throw r.bad("rope_theta", "must be a positive number");
        double partial = rope != null && rp.has("partial_rotary_factor") ? rope.num("partial_rotary_factor", 1.0) : r.num("partial_rotary_factor", 1.0);
        if (partial != 1.0) throw r.bad("partial_rotary_factor", partial + " is not supported; the Llama family rotates the whole head: remove it or set 1.0");
        Llama3RopeScaling scaling = switch (ropeType) {
            case "default" -> null;
            case "llama3" -> llama3(rope);
            default -> throw rope.bad("rope_type", "'" + ropeType + "' is not supported; decodiff runs \"default\" and \"llama3\" RoPE for " + type);
        };
        return new LlamaConfig(type, vocab, hidden, L, nh, nkv, hd, inter, eps, theta, scaling, attnBias, mlpBias, qwen3, tie, maxPos);
    }

    private static Llama3RopeScaling llama3(ConfigFields rope) {
        double factor = required(rope, "factor"), low = required(rope, "low_freq_factor"), high = required(rope, "high_freq_factor");
        Integer old = rope.optInt("original_max_position_embeddings");
        if (old == null) throw rope.bad("original_max_position_embeddings", "is missing; llama3 RoPE needs the pre-training context length (8192 for Llama 3.x)");
        if (!(factor >= 1)) throw rope.bad("factor", factor + " is below 1; llama3 RoPE stretches long wavelengths, so it must be at least 1");
        if (!(high > low)) throw rope.bad("high_freq_factor", high + " is not above low_freq_factor " + low + "; fix one of them");
        return new Llama3RopeScaling(factor, low, high, old);
    }

    private static double required(ConfigFields f, String field) {
        double v = f.num(field, Double.NaN);
        if (Double.isNaN(v)) throw f.bad(field, "is missing; llama3 RoPE needs factor, low_freq_factor, high_freq_factor and original_max_position_embeddings");
        return v;
    }
}
