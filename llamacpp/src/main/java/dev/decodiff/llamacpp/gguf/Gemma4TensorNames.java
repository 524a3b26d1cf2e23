package dev.decodiff.llamacpp.gguf;

import java.util.Map;
import java.util.regex.Pattern;

/**
 * Hugging Face Gemma 4 text weight names → the GGUF names llama.cpp's gemma4 loader asks for (the names of
 * gguf-py's tensor map for MODEL_ARCH.GEMMA4). Names are given below the text model's prefix ("model." or
 * "model.language_model."), so "layers.3.self_attn.q_proj.weight" → "blk.3.attn_q.weight".
 */
public final class Gemma4TensorNames {
    private static final Map<String, String> GLOBAL = Map.of(
            "embed_tokens.weight", "token_embd.weight",
            "norm.weight", "output_norm.weight",
            "embed_tokens_per_layer.weight", "per_layer_token_embd.weight",
            "per_layer_model_projection.weight", "per_layer_model_proj.weight",
            "per_layer_projection_norm.weight", "per_layer_proj_norm.weight");

    private static final Map<String, String> PER_LAYER = Map.ofEntries(
            Map.entry("input_layernorm.weight", "attn_norm.weight"),
            Map.entry("post_attention_layernorm.weight", "post_attention_norm.weight"),
            Map.entry("pre_feedforward_layernorm.weight", "ffn_norm.weight"),
            Map.entry("post_feedforward_layernorm.weight", "post_ffw_norm.weight"),
            Map.entry("pre_feedforward_layernorm_2.weight", "pre_ffw_norm_2.weight"),
            Map.entry("post_feedforward_layernorm_1.weight", "post_ffw_norm_1.weight"),
            Map.entry("post_feedforward_layernorm_2.weight", "post_ffw_norm_2.weight"),
            Map.entry("layer_scalar", "layer_output_scale.weight"),
            Map.entry("self_attn.q_proj.weight", "attn_q.weight"),
            Map.entry("self_attn.k_proj.weight", "attn_k.weight"),
            Map.entry("self_attn.v_proj.weight", "attn_v.weight"),
            Map.entry("self_attn.o_proj.weight", "attn_output.weight"),
            Map.entry("self_attn.q_norm.weight", "attn_q_norm.weight"),
            Map.entry("self_attn.k_norm.weight", "attn_k_norm.weight"),
            Map.entry("mlp.gate_proj.weight", "ffn_gate.weight"),
            Map.entry("mlp.up_proj.weight", "ffn_up.weight"),
            Map.entry("mlp.down_proj.weight", "ffn_down.weight"),
            Map.entry("per_layer_input_gate.weight", "inp_gate.weight"),
            Map.entry("per_layer_projection.weight", "proj.weight"),
            Map.entry("post_per_layer_input_norm.weight", "post_norm.weight"),
            Map.entry("router.proj.weight", "ffn_gate_inp.weight"),
            // The converter stores the router's input scale and the per-expert output scale as ".scale" companions.
            Map.entry("router.scale", "ffn_gate_inp.scale"),
            Map.entry("router.per_expert_scale", "ffn_down_exps.scale"),
            Map.entry("experts.gate_up_proj", "ffn_gate_up_exps.weight"),
            Map.entry("experts.down_proj", "ffn_down_exps.weight"));

    private static final Pattern LAYER = Pattern.compile("layers\\.(\\d+)\\.(.+)");

    private Gemma4TensorNames() {}

    /** The Hugging Face name (below "model.", or "lm_head.weight") of a GGUF tensor, or null when it has none (rope_freqs). */
    public static String hfName(String ggufName) {
        if (ggufName.equals("output.weight")) return "lm_head.weight";
        for (var e : GLOBAL.entrySet()) if (e.getValue().equals(ggufName)) return e.getKey();
        var m = BLK.matcher(ggufName);
        if (!m.matches()) return null;
        for (var e : PER_LAYER.entrySet()) if (e.getValue().equals(m.group(2))) return "layers." + m.group(1) + "." + e.getKey();
        return null;
    }

    private static final Pattern BLK = Pattern.compile("blk\\.(\\d+)\\.(.+)");

    /** The GGUF name of a text-model weight, or null when llama.cpp's gemma4 model has no such tensor. */
    public static String ggufName(String hfName) {
        if (hfName.equals("lm_head.weight")) return "output.weight";
        var g = GLOBAL.get(hfName);
        if (g != null) return g;
        var m = LAYER.matcher(hfName);
        if (!m.matches()) return null;
        var suffix = PER_LAYER.get(m.group(2));
        return suffix == null ? null : "blk." + Integer.parseInt(m.group(1)) + "." + suffix;
    }
}
