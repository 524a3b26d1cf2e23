package dev.decodiff.llamacpp.gguf;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.decodiff.llamacpp.gguf.Gemma4GgufPlan.HfTensor;
import dev.decodiff.llamacpp.gguf.Gemma4GgufPlan.Planned;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.LongUnaryOperator;
import java.util.regex.Pattern;

/**
 * What a Qwen3.5 GGUF (llama.cpp's qwen35 / qwen35moe) holds, as the pinned converter's Qwen3_5TextModel /
 * Qwen3_5MoeTextModel (Qwen3NextModel, _LinearAttentionVReorderBase) writes it:
 * <ul>
 *   <li>zero-centred norms (input/post-attention, q/k, final) are stored as 1+w; the gated norm of the linear
 *   attention (linear_attn.norm) is stored as it is;</li>
 *   <li>A_log is stored as ssm_a = −exp(A_log); dt_bias is renamed ssm_dt.bias; conv1d [C,1,K] is squeezed;</li>
 *   <li>with fewer key heads than value heads, every value-head axis (V rows of in_proj_qkv and of the conv, z, a,
 *   b, A_log, dt_bias, out_proj's columns) goes from grouped order [k0v0, k0v1, k1v0, k1v1] to tiled order [k0v0,
 *   k1v0, k0v1, k1v1], so ggml's broadcasting repeat of the key heads pairs each value head with its key head;</li>
 *   <li>experts are stored stacked per layer (ffn_{gate,up,down}_exps), the fused gate_up_proj split in two;</li>
 *   <li>the vision tower and the MTP head are left out (the converter's --no-mtp).</li>
 * </ul>
 * Arithmetic is in float32 on the checkpoint values widened to float32, as the converter does.
 */
public record Qwen35GgufPlan(Map<String, GgufValue> metadata, List<Planned> tensors) implements GgufPlan {

    public static final String DENSE = "qwen35", MOE = "qwen35moe";

    private static final Map<String, String> GLOBAL = Map.of(
            "embed_tokens.weight", "token_embd.weight",
            "norm.weight", "output_norm.weight");

    private static final Map<String, String> PER_LAYER = Map.ofEntries(
            Map.entry("input_layernorm.weight", "attn_norm.weight"),
            Map.entry("post_attention_layernorm.weight", "post_attention_norm.weight"),
            Map.entry("linear_attn.A_log", "ssm_a"),
            Map.entry("linear_attn.conv1d.weight", "ssm_conv1d.weight"),
            Map.entry("linear_attn.dt_bias", "ssm_dt.bias"),
            Map.entry("linear_attn.in_proj_a.weight", "ssm_alpha.weight"),
            Map.entry("linear_attn.in_proj_b.weight", "ssm_beta.weight"),
            Map.entry("linear_attn.in_proj_qkv.weight", "attn_qkv.weight"),
            Map.entry("linear_attn.in_proj_z.weight", "attn_gate.weight"),
            Map.entry("linear_attn.norm.weight", "ssm_norm.weight"),
            Map.entry("linear_attn.out_proj.weight", "ssm_out.weight"),
            Map.entry("self_attn.q_proj.weight", "attn_q.weight"),
            Map.entry("self_attn.k_proj.weight", "attn_k.weight"),
            Map.entry("self_attn.v_proj.weight", "attn_v.weight"),
            Map.entry("self_attn.o_proj.weight", "attn_output.weight"),
            Map.entry("self_attn.q_norm.weight", "attn_q_norm.weight"),
            Map.entry("self_attn.k_norm.weight", "attn_k_norm.weight"),
            Map.entry("mlp.gate_proj.weight", "ffn_gate.weight"),
            Map.entry("mlp.up_proj.weight", "ffn_up.weight"),
            Map.entry("mlp.down_proj.weight", "ffn_down.weight"),
            Map.entry("mlp.gate.weight", "ffn_gate_inp.weight"),
            Map.entry("mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"),
            Map.entry("mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"),
            Map.entry("mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"),
            Map.entry("mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight"));

    private static final Pattern LAYER = Pattern.compile("layers\\.(\\d+)\\.(.+)");
    private static final Pattern EXPERT = Pattern.compile("mlp\\.experts\\.(\\d+)\\.(gate|up|down)_proj\\.weight");

    /**
     * The GGUF tensor a text checkpoint's tensor goes to ("layers.0.linear_attn.out_proj.weight" → "blk.0.ssm_out.weight";
     * a per-expert "layers.1.mlp.experts.3.down_proj.weight" → its layer's stacked "blk.1.ffn_down_exps.weight"), or null.
     */
    public static String ggufTensorName(String hfTextName) {
        if (hfTextName.equals("lm_head.weight")) return "output.weight";
        if (GLOBAL.containsKey(hfTextName)) return GLOBAL.get(hfTextName);
        var m = LAYER.matcher(hfTextName);
        if (!m.matches()) return null;
        String blk = "blk." + m.group(1) + ".";
        var e = EXPERT.matcher(m.group(2));
        if (e.matches()) return blk + "ffn_" + e.group(2) + "_exps.weight";
        String g = PER_LAYER.get(m.group(2));
        return g == null ? null : blk + g;
    }

    /** Whether config.json describes a Qwen3.5 model (text or multimodal, dense or MoE). */
    public static boolean isQwen35(JsonNode root) {
        String t = root.path("model_type").asText("");
        return t.startsWith("qwen3_5");
    }

    public static Qwen35GgufPlan of(String modelName, JsonNode configRoot, Path configFile, List<HfTensor> hfTensors, GgufOutputType outType) {
        var h = hparams(configRoot, configFile);
        boolean moe = h.c().path("model_type").asText("").equals("qwen3_5_moe_text") || h.c().has("num_experts");
        String arch = moe ? MOE : DENSE;
        String a = arch + ".";
        int L = h.required("num_hidden_layers");
        int hk = h.required("linear_num_key_heads"), hv = h.required("linear_num_value_heads");
        int dk = h.required("linear_key_head_dim"), dv = h.required("linear_value_head_dim");
        if (hv % hk != 0) throw new GgufException(configFile, "linear_num_value_heads " + hv + " is not a multiple of linear_num_key_heads " + hk);
        JsonNode rope = h.c().path("rope_parameters");
        if (!rope.isObject()) rope = h.c(); // legacy top-level rope_theta / partial_rotary_factor

        var md = new LinkedHashMap<String, GgufValue>();
        md.put("general.architecture", GgufValue.string(arch));
        md.put("general.type", GgufValue.string("model"));
        md.put("general.name", GgufValue.string(modelName));
        // TextModel.set_gguf_parameters
        md.put(a + "block_count", GgufValue.u32(L));
        md.put(a + "context_length", GgufValue.u32(h.required("max_position_embeddings")));
        md.put(a + "embedding_length", GgufValue.u32(h.required("hidden_size")));
        Integer ff = h.optInt("intermediate_size");
        if (ff != null) md.put(a + "feed_forward_length", GgufValue.u32(ff));
        md.put(a + "attention.head_count", GgufValue.u32(h.required("num_attention_heads")));
        md.put(a + "attention.head_count_kv", GgufValue.u32(h.required("num_key_value_heads")));
        JsonNode sections = rope.get("mrope_section");
        if (sections != null && sections.isArray()) {
            var s = new ArrayList<Integer>();
            for (var n : sections) s.add(n.asInt());
            while (s.size() < 4) s.add(0);
            md.put(a + "rope.dimension_sections", GgufValue.i32Array(s.subList(0, 4)));
        }
        if (rope.has("rope_theta")) md.put(a + "rope.freq_base", GgufValue.f32((float) rope.get("rope_theta").asDouble()));
        md.put(a + "attention.layer_norm_rms_epsilon", GgufValue.f32((float) h.c().path("rms_norm_eps").asDouble(1e-6)));
        if (moe) {
            md.put(a + "expert_count", GgufValue.u32(h.required("num_experts")));
            md.put(a + "expert_used_count", GgufValue.u32(h.required("num_experts_per_tok")));
        }
        Integer headDim = h.optInt("head_dim");
        if (headDim != null) {
            md.put(a + "attention.key_length", GgufValue.u32(headDim));
            md.put(a + "attention.value_length", GgufValue.u32(headDim));
        }
        md.put("general.file_type", GgufValue.u32(outType.fileType()));
        // Qwen2MoeModel.set_gguf_parameters (the dense Qwen3.5 has neither key)
        Integer moeFf = h.optInt("moe_intermediate_size"), sharedFf = h.optInt("shared_expert_intermediate_size");
        if (moeFf != null) md.put(a + "expert_feed_forward_length", GgufValue.u32(moeFf));
        if (sharedFf != null) md.put(a + "expert_shared_feed_forward_length", GgufValue.u32(sharedFf));
        // Qwen3NextModel.set_gguf_parameters
        md.put(a + "ssm.conv_kernel", GgufValue.u32(h.required("linear_conv_kernel_dim")));
        md.put(a + "ssm.state_size", GgufValue.u32(dk));
        md.put(a + "ssm.group_count", GgufValue.u32(hk));
        md.put(a + "ssm.time_step_rank", GgufValue.u32(hv));
        md.put(a + "ssm.inner_size", GgufValue.u32((long) dv * hv));
        JsonNode lt = h.c().get("layer_types");
        if (lt != null && lt.isArray()) {
            if (lt.size() != L) throw new GgufException(configFile, "layer_types has " + lt.size() + " entries, expected num_hidden_layers (" + L + ")");
            var rec = new ArrayList<Boolean>();
            for (var t : lt) rec.add(t.asText().equals("linear_attention"));
            md.put(a + "attention.recurrent_layers", GgufValue.boolArray(rec));
        }
        md.put(a + "full_attention_interval", GgufValue.u32(h.integer("full_attention_interval", 4)));
        int ropeDim = headDim != null ? headDim : h.required("hidden_size") / h.required("num_attention_heads");
        md.put(a + "rope.dimension_count", GgufValue.u32((int) (ropeDim * rope.path("partial_rotary_factor").asDouble(0.25))));
        // _Qwen35MRopeMixin: llama.cpp's qwen35 loaders require the sections
        if (sections == null || !sections.isArray()) md.put(a + "rope.dimension_sections", GgufValue.i32Array(List.of(11, 11, 10, 0)));
        md.put("general.quantization_version", GgufValue.u32(2));
        // No tokenizer: llama.cpp's "none" vocabulary with vocab_size dummy tokens; token ids are fed directly.
        md.put("tokenizer.ggml.model", GgufValue.string("none"));
        md.put(a + "vocab_size", GgufValue.u32(h.required("vocab_size")));

        var heads = new VHeads(hk, hv / hk, dk, dv);
        var out = new ArrayList<Planned>();
        var experts = new TreeMap<Integer, TreeMap<String, TreeMap<Integer, HfTensor>>>(); // layer → kind → expert → tensor
        var sorted = new ArrayList<>(hfTensors);
        sorted.sort(Comparator.comparing(HfTensor::name));
        for (var t : sorted) {
            String n = textName(t.name());
            if (n == null) continue;
            var m = LAYER.matcher(n);
            if (m.matches()) {
                int layer = Integer.parseInt(m.group(1));
                String rest = m.group(2);
                var e = EXPERT.matcher(rest);
                if (e.matches()) {
                    experts.computeIfAbsent(layer, k -> new TreeMap<>()).computeIfAbsent(e.group(2), k -> new TreeMap<>()).put(Integer.parseInt(e.group(1)), t);
                    continue;
                }
                String blk = "blk." + layer + ".";
                if (rest.equals("mlp.experts.gate_up_proj")) {
                    out.addAll(splitGateUp(blk, t, outType));
                    continue;
                }
                if (rest.equals("mlp.experts.down_proj")) {
                    out.add(planned(blk + "ffn_down_exps.weight", HfConfigInts.ne(t.shape()), t, null, outType));
                    continue;
                }
                String g = PER_LAYER.get(rest);
                if (g == null) throw new GgufException(configFile.resolveSibling(""), "tensor '" + t.name() + "' has no place in llama.cpp's " + arch + " model (not a Qwen3.5 text checkpoint?)");
                out.add(layerTensor(blk + g, rest, t, heads, outType));
            } else {
                String g = n.equals("lm_head.weight") ? "output.weight" : GLOBAL.get(n);
                if (g == null) throw new GgufException(configFile.resolveSibling(""), "tensor '" + t.name() + "' has no place in llama.cpp's " + arch + " model");
                var d = n.equals("norm.weight") ? new GgufPlan.Derived(List.of(t.name()), i -> i, x -> x + 1.0f) : null;
                out.add(planned(g, HfConfigInts.ne(t.shape()), t, d, outType));
            }
        }
        experts.forEach((layer, kinds) -> {
            // Qwen2MoeModel.modify_tensors stacks down, gate, up (in that order) once all experts of a layer are in
            for (String kind : List.of("down", "gate", "up")) {
                var byExpert = kinds.get(kind);
                if (byExpert == null) throw new GgufException(configFile.resolveSibling(""), "layer " + layer + " has per-expert weights but no " + kind + "_proj ones");
                var first = byExpert.firstEntry().getValue();
                var names = byExpert.values().stream().map(HfTensor::name).toList();
                long[] ne = {first.shape()[1], first.shape()[0], names.size()};
                out.add(planned("blk." + layer + ".ffn_" + kind + "_exps.weight", ne, first,
                        new GgufPlan.Derived(names, i -> i, GgufPlan.Derived.IDENTITY), outType));
            }
        });
        var seen = new HashSet<String>();
        for (var p : out) if (!seen.add(p.name())) throw new GgufException(configFile.resolveSibling(""), "two tensors map to '" + p.name() + "'");
        return new Qwen35GgufPlan(md, out);
    }

    /** The value-head geometry: hk key heads, r value heads per key head. */
    private record VHeads(int hk, int r, int dk, int dv) {
        boolean reorders() { return r > 1; }

        /** Tiled-order position → grouped-order source index along an axis of hk·r heads of d elements. */
        long source(long i, int d) {
            long head = i / d, within = i % d;
            long j = head / hk, g = head % hk;     // tiled: head = j·hk + g
            return (g * r + j) * d + within;       // grouped: head = g·r + j
        }
    }

    private static Planned layerTensor(String g, String rest, HfTensor t, VHeads v, GgufOutputType outType) {
        long[] shape = t.shape();
        long[] ne = HfConfigInts.ne(rest.endsWith("conv1d.weight") ? new long[]{shape[0], shape[shape.length - 1]} : shape);
        LongUnaryOperator index = null;
        if (v.reorders()) {
            long qk = 2L * v.hk * v.dk;
            switch (rest) {
                case "linear_attn.in_proj_qkv.weight", "linear_attn.conv1d.weight" -> {
                    long row = ne[0];  // rows are channels: q and k rows stay, v rows reorder
                    index = i -> { long r = i / row; return r < qk ? i : (qk + v.source(r - qk, v.dv)) * row + i % row; };
                }
                case "linear_attn.in_proj_z.weight" -> { long row = ne[0]; index = i -> v.source(i / row, v.dv) * row + i % row; }
                case "linear_attn.in_proj_a.weight", "linear_attn.in_proj_b.weight" -> { long row = ne[0]; index = i -> v.source(i / row, 1) * row + i % row; }
                case "linear_attn.A_log", "linear_attn.dt_bias" -> index = i -> v.source(i, 1);
                case "linear_attn.out_proj.weight" -> { long row = ne[0]; index = i -> (i / row) * row + v.source(i % row, v.dv); }
                default -> { }
            }
        }
        GgufPlan.FloatOp op = GgufPlan.Derived.IDENTITY;
        if (rest.equals("linear_attn.A_log")) op = x -> (float) -Math.exp(x);
        else if (rest.endsWith("norm.weight") && !rest.equals("linear_attn.norm.weight")) op = x -> x + 1.0f;
        var d = index == null && op == GgufPlan.Derived.IDENTITY ? null
                : new GgufPlan.Derived(List.of(t.name()), index == null ? i -> i : index, op);
        return planned(g, ne, t, d, outType);
    }

    /** experts.gate_up_proj [E, 2I, H] → ffn_gate_exps and ffn_up_exps, each ne {H, I, E}. */
    private static List<Planned> splitGateUp(String blk, HfTensor t, GgufOutputType outType) {
        long e = t.shape()[0], twoI = t.shape()[1], hidden = t.shape()[2], half = twoI / 2 * hidden;
        long[] ne = {hidden, twoI / 2, e};
        return List.of(
                planned(blk + "ffn_gate_exps.weight", ne, t, new GgufPlan.Derived(List.of(t.name()), i -> (i / half) * 2 * half + i % half, GgufPlan.Derived.IDENTITY), outType),
                planned(blk + "ffn_up_exps.weight", ne, t, new GgufPlan.Derived(List.of(t.name()), i -> (i / half) * 2 * half + half + i % half, GgufPlan.Derived.IDENTITY), outType));
    }

    private static Planned planned(String g, long[] ne, HfTensor t, GgufPlan.Derived d, GgufOutputType outType) {
        var type = typeOf(g, ne, outType);
        if (type.blockSize() > 1 && ne[0] % type.blockSize() != 0) type = GgmlType.F16;
        return new Planned(g, ne, type, t.name(), null, d);
    }

    /** The converter's rule: 1-D tensors, norms, the routers, the conv kernel and non-".weight" tensors stay F32. */
    static GgmlType typeOf(String g, long[] ne, GgufOutputType outType) {
        if (ne.length <= 1 || g.endsWith("_norm.weight") || !g.endsWith(".weight")) return GgmlType.F32;
        if (g.endsWith(".ffn_gate_inp.weight") || g.endsWith(".ffn_gate_inp_shexp.weight") || g.endsWith(".ssm_conv1d.weight")) return GgmlType.F32;
        return outType.matrixType();
    }

    /** The name below the text model's prefix ("lm_head.weight" as it is), or null for the vision tower and the MTP head. */
    static String textName(String name) {
        if (name.equals("lm_head.weight")) return name;
        if (name.startsWith("model.language_model.")) return name.substring("model.language_model.".length());
        if (name.startsWith("model.visual.") || name.startsWith("mtp.") || name.startsWith("model.mtp.")) return null;
        if (name.startsWith("model.")) return name.substring("model.".length());
        return null;
    }


    private static HfConfigInts hparams(JsonNode root, Path file) {
        if (root == null || !root.isObject()) throw new GgufException(file, "is not a JSON object");
        JsonNode c = root;
        if (root.has("text_config") && root.get("text_config").isObject()) {
            var merged = ((ObjectNode) root).deepCopy();
            merged.setAll((ObjectNode) root.get("text_config"));
            c = merged;
        }
        String type = c.path("model_type").asText("");
        if (!type.equals("qwen3_5_text") && !type.equals("qwen3_5_moe_text") && !type.equals("qwen3_5") && !type.equals("qwen3_5_moe"))
            throw new GgufException(file, "model_type '" + type + "' is not Qwen3.5 (qwen3_5_text, qwen3_5_moe_text, or qwen3_5 / qwen3_5_moe with a text_config)");
        return new HfConfigInts(c, file);
    }

}
