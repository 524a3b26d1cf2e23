package dev.decodiff.engine.qwen35;

import com.fasterxml.jackson.databind.JsonNode;
import dev.decodiff.engine.CheckpointException;
import dev.decodiff.engine.ConfigFields;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The qwen3_5_text / qwen3_5_moe_text configuration (transformers 5.17), read from config.json directly or from the
 * text_config of a multimodal qwen3_5 / qwen3_5_moe config (the vision tower's config is ignored). Values the engine
 * cannot honour are refused with one line naming the field and the fix.
 */
public record Qwen35Config(
        String modelType, int vocabSize, int hidden, int numLayers, List<Mixer> layerTypes,
        int numHeads, int numKvHeads, int headDim, int rotaryDim, double ropeTheta,
        int linearKeyHeads, int linearValueHeads, int linearKeyDim, int linearValueDim, int convKernel,
        float rmsNormEps, int intermediate, boolean moe, int numExperts, int topK, int moeIntermediate,
        int sharedIntermediate, boolean tieWordEmbeddings, int maxPositions) {

    /** The token mixer of a layer: Gated DeltaNet ("linear_attention") or gated full attention. */
    public enum Mixer { LINEAR, FULL }

    public static final String DENSE = "qwen3_5_text";
    public static final String MOE = "qwen3_5_moe_text";

    public Mixer mixer(int layer) { return layerTypes.get(layer); }

    /** key_dim = Hk·dk. */
    public int keyDim() { return linearKeyHeads * linearKeyDim; }

    /** value_dim = Hv·dv. */
    public int valueDim() { return linearValueHeads * linearValueDim; }

    /** The conv channels: q, k, v of every head. */
    public int convDim() { return 2 * keyDim() + valueDim(); }

    public static Qwen35Config read(Path file) {
        return parse(ConfigFields.readRoot(file), file.toString());
    }

    public static Qwen35Config parse(JsonNode root, String file) {
        if (root == null || !root.isObject()) throw new CheckpointException(file + ": config.json is not a JSON object");
        String top = root.path("model_type").asText("");
        JsonNode c = root;
        String type = top;
        if (top.equals("qwen3_5") || top.equals("qwen3_5_moe")) {
            c = root.get("text_config");
            if (c == null || !c.isObject())
                throw new CheckpointException(file + ": model_type '" + top + "' has no text_config object; add the text model's config as text_config");
            type = c.path("model_type").asText(top + "_text");
        }
        if (!type.equals(DENSE) && !type.equals(MOE))
            throw new CheckpointException(file + ": model_type '" + type + "' is not a Qwen3.5 text model (expected qwen3_5_text or qwen3_5_moe_text)");
        boolean moe = type.equals(MOE);
        var r = new ConfigFields(c, file, c == root ? "" : "text_config.");

        String act = r.str("hidden_act", "silu");
        if (!act.equals("silu")) throw r.bad("hidden_act", "'" + act + "' is not supported; Qwen3.5 uses silu");
        if (r.bool("attention_bias", false)) throw r.bad("attention_bias", "true is not supported; Qwen3.5's projections have no bias, set it to false");

        int vocab = r.positive("vocab_size", 248320);
        int hidden = r.positive("hidden_size", moe ? 2048 : 4096);
        int L = r.positive("num_hidden_layers", moe ? 40 : 32);
        int nh = r.positive("num_attention_heads", 16);
        int nkv = r.positive("num_key_value_heads", moe ? 2 : 4);
        if (nh % nkv != 0) throw r.bad("num_key_value_heads", nkv + " does not divide num_attention_heads " + nh + "; fix one of them");
        Integer hdOpt = r.optInt("head_dim");
        int hd = hdOpt != null ? hdOpt : hidden / nh;
        int hk = r.positive("linear_num_key_heads", 16);
        int hv = r.positive("linear_num_value_heads", 32);
        if (hv % hk != 0) throw r.bad("linear_num_value_heads", hv + " is not a multiple of linear_num_key_heads " + hk + "; fix one of them");
        int dk = r.positive("linear_key_head_dim", 128);
        int dv = r.positive("linear_value_head_dim", 128);
        int conv = r.positive("linear_conv_kernel_dim", 4);
        if (conv < 2) throw r.bad("linear_conv_kernel_dim", conv + " is too small; the causal conv needs at least 2 taps");
        float eps = (float) r.num("rms_norm_eps", 1e-6);
        if (!(eps > 0)) throw r.bad("rms_norm_eps", "must be a positive number");
        int maxPos = r.positive("max_position_embeddings", 32768);
        boolean tie = r.bool("tie_word_embeddings", root.path("tie_word_embeddings").asBoolean(false));

        // RoPE: rope_parameters (5.x), or the legacy top-level rope_theta / partial_rotary_factor.
        JsonNode rp = c.get("rope_parameters");
        if (rp == null || rp.isNull()) rp = c.get("rope_scaling");
        String ropeType = rp != null && rp.isObject() ? rp.path("rope_type").asText(rp.path("type").asText("default")) : "default";
        if (!ropeType.equals("default"))
            throw r.bad("rope_parameters.rope_type", "'" + ropeType + "' is not supported; the engine implements the default (text-only M-RoPE) rotation");
        double theta = rp != null && rp.has("rope_theta") ? rp.get("rope_theta").asDouble() : r.num("rope_theta", 10000.0);
        double partial = rp != null && rp.has("partial_rotary_factor") ? rp.get("partial_rotary_factor").asDouble() : r.num("partial_rotary_factor", 0.25);
        int rot = (int) (hd * partial);
        if (rot < 2 || rot % 2 != 0 || rot > hd)
            throw r.bad("rope_parameters.partial_rotary_factor", partial + " gives " + rot + " rotary dims of head_dim " + hd + "; it must give an even number between 2 and head_dim");

        var types = new ArrayList<Mixer>();
        JsonNode lt = c.get("layer_types");
        if (lt != null && !lt.isNull()) {
            if (!lt.isArray() || lt.size() != L)
                throw r.bad("layer_types", "must be a list of " + L + " entries (num_hidden_layers), each \"linear_attention\" or \"full_attention\"");
            for (int i = 0; i < L; i++) {
                String t = lt.get(i).asText("");
                types.add(switch (t) {
                    case "linear_attention" -> Mixer.LINEAR;
                    case "full_attention" -> Mixer.FULL;
                    default -> throw r.bad("layer_types[" + i + "]", "'" + t + "' is neither \"linear_attention\" nor \"full_attention\"");
                });
            }
        } else {
            int interval = r.positive("full_attention_interval", 4);
            for (int i = 0; i < L; i++) types.add((i + 1) % interval == 0 ? Mixer.FULL : Mixer.LINEAR);
        }

        int inter = 0, experts = 0, topK = 0, moeInter = 0, shared = 0;
        if (moe) {
            experts = r.positive("num_experts", 256);
            topK = r.positive("num_experts_per_tok", 8);
            if (topK > experts) throw r.bad("num_experts_per_tok", topK + " exceeds num_experts " + experts + "; lower it");
            moeInter = r.positive("moe_intermediate_size", 512);
            shared = r.positive("shared_expert_intermediate_size", 512);
        } else {
            inter = r.positive("intermediate_size", 12288);
        }
        return new Qwen35Config(type, vocab, hidden, L, List.copyOf(types), nh, nkv, hd, rot, theta, hk, hv, dk, dv, conv,
                eps, inter, moe, experts, topK, moeInter, shared, tie, maxPos);
    }
}
