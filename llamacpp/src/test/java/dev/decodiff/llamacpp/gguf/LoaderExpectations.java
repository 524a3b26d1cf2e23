package dev.decodiff.llamacpp.gguf;

import dev.decodiff.engine.Gemma4Config;
import dev.decodiff.engine.LayerSpec;
import dev.decodiff.engine.LayerType;
import dev.decodiff.metal.DType;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The two sides of a conversion, each written from its own source and the engine's reading of config.json:
 * the safetensors a transformers 5.17 checkpoint holds, and the tensors llama.cpp
 * v0.5.0's gemma4 loader creates, with the ggml shapes it asks for (models/gemma4.cpp, load_arch_tensors).
 */
final class LoaderExpectations {
    private LoaderExpectations() {}

    /** GGUF name → ne, exactly the tensors llama.cpp's loader creates for this config (KV-shared layers without attn_k). */
    static Map<String, List<Long>> llamaCppTensors(Gemma4Config c) {
        long H = c.hidden(), V = c.vocabSize(), P = c.pleDim(), L = c.numLayers(), nh = c.numHeads();
        var t = new LinkedHashMap<String, List<Long>>();
        t.put("token_embd.weight", List.of(H, V));
        if (!c.tieWordEmbeddings()) t.put("output.weight", List.of(H, V));
        if (P > 0) {
            t.put("per_layer_token_embd.weight", List.of(P * L, V));
            t.put("per_layer_model_proj.weight", List.of(H, P * L));
            t.put("per_layer_proj_norm.weight", List.of(P));
        }
        t.put("output_norm.weight", List.of(H));
        for (var l : c.layers()) {
            if (l.type() == LayerType.FULL) t.put("rope_freqs.weight", List.of((long) l.headDim() / 2));
        }
        for (var l : c.layers()) {
            String b = "blk." + l.index() + ".";
            long d = l.headDim(), kv = (long) l.kvHeads() * l.headDim(), I = l.intermediate();
            t.put(b + "attn_norm.weight", List.of(H));
            t.put(b + "attn_q.weight", List.of(H, d * nh));
            if (!l.kvShared()) t.put(b + "attn_k.weight", List.of(H, kv));
            if (!l.kvShared() && !l.kEqV()) t.put(b + "attn_v.weight", List.of(H, kv));
            t.put(b + "attn_output.weight", List.of(d * nh, H));
            t.put(b + "attn_q_norm.weight", List.of(d));
            if (!l.kvShared()) t.put(b + "attn_k_norm.weight", List.of(d));
            t.put(b + "post_attention_norm.weight", List.of(H));
            t.put(b + "layer_output_scale.weight", List.of(1L));
            t.put(b + "ffn_norm.weight", List.of(H));
            t.put(b + "ffn_gate.weight", List.of(H, I));
            t.put(b + "ffn_up.weight", List.of(H, I));
            t.put(b + "ffn_down.weight", List.of(I, H));
            t.put(b + "post_ffw_norm.weight", List.of(H));
            if (c.moe()) {
                long E = c.numExperts(), Im = c.moeIntermediate();
                t.put(b + "ffn_gate_inp.weight", List.of(H, E));
                t.put(b + "ffn_gate_inp.scale", List.of(H));
                t.put(b + "pre_ffw_norm_2.weight", List.of(H));
                t.put(b + "post_ffw_norm_1.weight", List.of(H));
                t.put(b + "post_ffw_norm_2.weight", List.of(H));
                t.put(b + "ffn_gate_up_exps.weight", List.of(H, 2 * Im, E));
                t.put(b + "ffn_down_exps.weight", List.of(Im, H, E));
                t.put(b + "ffn_down_exps.scale", List.of(E));
            }
            if (P > 0) {
                t.put(b + "inp_gate.weight", List.of(H, P));
                t.put(b + "proj.weight", List.of(P, H));
                t.put(b + "post_norm.weight", List.of(H));
            }
        }
        return t;
    }

    /** The safetensors headers of a checkpoint of this config, bf16, under {@code prefix} ("model." or "model.language_model."). */
    static List<Gemma4GgufPlan.HfTensor> checkpointTensors(Gemma4Config c, String prefix) {
        long H = c.hidden(), P = c.pleDim(), L = c.numLayers(), nh = c.numHeads();
        var out = new ArrayList<Gemma4GgufPlan.HfTensor>();
        add(out, prefix + "embed_tokens.weight", c.vocabSize(), H);
        add(out, prefix + "norm.weight", H);
        if (P > 0) {
            add(out, prefix + "embed_tokens_per_layer.weight", c.pleVocab(), L * P);
            add(out, prefix + "per_layer_model_projection.weight", L * P, H);
            add(out, prefix + "per_layer_projection_norm.weight", P);
        }
        for (LayerSpec l : c.layers()) {
            String b = prefix + "layers." + l.index() + ".";
            long d = l.headDim(), kv = (long) l.kvHeads() * d, I = l.intermediate();
            for (String n : List.of("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"))
                add(out, b + n + ".weight", H);
            add(out, b + "layer_scalar", 1);
            add(out, b + "self_attn.q_proj.weight", nh * d, H);
            add(out, b + "self_attn.q_norm.weight", d);
            add(out, b + "self_attn.o_proj.weight", H, nh * d);
            if (!l.kvShared()) {
                add(out, b + "self_attn.k_proj.weight", kv, H);
                add(out, b + "self_attn.k_norm.weight", d);
                if (!l.kEqV()) add(out, b + "self_attn.v_proj.weight", kv, H);
            }
            add(out, b + "mlp.gate_proj.weight", I, H);
            add(out, b + "mlp.up_proj.weight", I, H);
            add(out, b + "mlp.down_proj.weight", H, I);
            if (P > 0) {
                add(out, b + "per_layer_input_gate.weight", P, H);
                add(out, b + "per_layer_projection.weight", H, P);
                add(out, b + "post_per_layer_input_norm.weight", H);
            }
            if (c.moe()) {
                long E = c.numExperts(), Im = c.moeIntermediate();
                add(out, b + "router.proj.weight", E, H);
                add(out, b + "router.scale", H);
                add(out, b + "router.per_expert_scale", E);
                add(out, b + "experts.gate_up_proj", E, 2 * Im, H);
                add(out, b + "experts.down_proj", E, H, Im);
                for (String n : List.of("pre_feedforward_layernorm_2", "post_feedforward_layernorm_1", "post_feedforward_layernorm_2"))
                    add(out, b + n + ".weight", H);
            }
        }
        return out;
    }

    private static void add(List<Gemma4GgufPlan.HfTensor> out, String name, long... shape) {
        out.add(new Gemma4GgufPlan.HfTensor(name, DType.BF16, shape));
    }
}
