package dev.decodiff.llamacpp.gguf;

import com.fasterxml.jackson.databind.JsonNode;
import dev.decodiff.llamacpp.gguf.Gemma4GgufPlan.HfTensor;
import dev.decodiff.llamacpp.gguf.Gemma4GgufPlan.Planned;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * What a Llama-family GGUF (llama.cpp's llama for LlamaForCausalLM and MistralForCausalLM, qwen3 for
 * Qwen3ForCausalLM) holds, as the pinned converter's LlamaModel and Qwen3Model write it:
 * <ul>
 *   <li>for llama, the rows of q_proj and k_proj (weights and biases) are permuted within each head from
 *   transformers' rotate-half order [x0…x(d/2−1), x(d/2)…] to interleaved pairs [x0, x(d/2), x1, x(d/2+1), …], so that
 *   llama.cpp's "normal" RoPE (adjacent pairs) rotates what transformers' NeoX RoPE rotates; qwen3 keeps them (its
 *   RoPE is llama.cpp's NeoX);</li>
 *   <li>a llama3 rope_scaling becomes the tensor rope_freqs.weight: per frequency the factor its angle is divided
 *   by (1 for short wavelengths, factor for long ones, blended between), computed in float32 as the converter does;</li>
 *   <li>everything else is renamed as it is (token_embd, output, attn_q/k/v/output with their biases,
 *   attn_q_norm/attn_k_norm, ffn_gate/up/down with theirs).</li>
 * </ul>
 * No tokenizer is written: llama.cpp's "none" vocabulary of vocab_size tokens takes token ids directly.
 */
public record LlamaGgufPlan(Map<String, GgufValue> metadata, List<Planned> tensors) implements GgufPlan {

    public static final String LLAMA = "llama", QWEN3 = "qwen3";

    private static final Map<String, String> PER_LAYER = Map.ofEntries(
            Map.entry("input_layernorm.weight", "attn_norm.weight"),
            Map.entry("post_attention_layernorm.weight", "ffn_norm.weight"),
            Map.entry("self_attn.q_proj.weight", "attn_q.weight"),
            Map.entry("self_attn.q_proj.bias", "attn_q.bias"),
            Map.entry("self_attn.k_proj.weight", "attn_k.weight"),
            Map.entry("self_attn.k_proj.bias", "attn_k.bias"),
            Map.entry("self_attn.v_proj.weight", "attn_v.weight"),
            Map.entry("self_attn.v_proj.bias", "attn_v.bias"),
            Map.entry("self_attn.o_proj.weight", "attn_output.weight"),
            Map.entry("self_attn.o_proj.bias", "attn_output.bias"),
            Map.entry("self_attn.q_norm.weight", "attn_q_norm.weight"),
            Map.entry("self_attn.k_norm.weight", "attn_k_norm.weight"),
            Map.entry("mlp.gate_proj.weight", "ffn_gate.weight"),
            Map.entry("mlp.gate_proj.bias", "ffn_gate.bias"),
            Map.entry("mlp.up_proj.weight", "ffn_up.weight"),
            Map.entry("mlp.up_proj.bias", "ffn_up.bias"),
            Map.entry("mlp.down_proj.weight", "ffn_down.weight"),
            Map.entry("mlp.down_proj.bias", "ffn_down.bias"));

    private static final Pattern LAYER = Pattern.compile("model\\.layers\\.(\\d+)\\.(.+)");

    /** Whether config.json describes a model of this family (llama, mistral, qwen3). */
    public static boolean isLlamaFamily(JsonNode root) {
        String t = root.path("model_type").asText("");
        return t.equals("llama") || t.equals("mistral") || t.equals("qwen3");
    }

    /** The llama.cpp architecture a model_type converts to: llama for llama and mistral, qwen3 for qwen3. */
    public static String architectureOf(String modelType) { return modelType.equals("qwen3") ? QWEN3 : LLAMA; }

    public static LlamaGgufPlan of(String modelName, JsonNode c, Path configFile, List<HfTensor> hfTensors, GgufOutputType outType) {
        if (c == null || !c.isObject() || !isLlamaFamily(c))
            throw new GgufException(configFile, "model_type '" + (c == null ? "" : c.path("model_type").asText("")) + "' is not llama, mistral or qwen3");
        var h = new HfConfigInts(c, configFile);
        String arch = architectureOf(c.path("model_type").asText()), a = arch + ".";
        boolean llama = arch.equals(LLAMA);
        int L = h.required("num_hidden_layers"), hidden = h.required("hidden_size"), nh = h.required("num_attention_heads");
        int nkv = h.integer("num_key_value_heads", nh);
        Integer headDim = h.optInt("head_dim");
        int d = headDim != null ? headDim : hidden / nh;
        // transformers 5 keeps rope_theta in rope_parameters; older configs beside rope_scaling at the top level
        JsonNode rope = c.hasNonNull("rope_parameters") ? c.get("rope_parameters") : c.path("rope_scaling");
        JsonNode theta = rope.has("rope_theta") ? rope.get("rope_theta") : c.get("rope_theta");
        String ropeType = rope.path("rope_type").asText(rope.path("type").asText("default"));

        var md = new LinkedHashMap<String, GgufValue>();
        md.put("general.architecture", GgufValue.string(arch));
        md.put("general.type", GgufValue.string("model"));
        md.put("general.name", GgufValue.string(modelName));
        // TextModel.set_gguf_parameters
        md.put(a + "block_count", GgufValue.u32(L));
        md.put(a + "context_length", GgufValue.u32(h.required("max_position_embeddings")));
        md.put(a + "embedding_length", GgufValue.u32(hidden));
        md.put(a + "feed_forward_length", GgufValue.u32(h.required("intermediate_size")));
        md.put(a + "attention.head_count", GgufValue.u32(nh));
        if (c.has("num_key_value_heads")) md.put(a + "attention.head_count_kv", GgufValue.u32(nkv));
        if (theta != null && theta.isNumber()) md.put(a + "rope.freq_base", GgufValue.f32((float) theta.asDouble()));
        if (c.has("rms_norm_eps")) md.put(a + "attention.layer_norm_rms_epsilon", GgufValue.f32((float) c.get("rms_norm_eps").asDouble()));
        if (headDim != null) {
            md.put(a + "attention.key_length", GgufValue.u32(headDim));
            md.put(a + "attention.value_length", GgufValue.u32(headDim));
        }
        md.put("general.file_type", GgufValue.u32(outType.fileType()));
        // LlamaModel.set_gguf_parameters; qwen3 needs vocab_size too, for the "none" vocabulary below
        md.put(a + "vocab_size", GgufValue.u32(h.required("vocab_size")));
        if (llama) md.put(a + "rope.dimension_count", GgufValue.u32(d));
        md.put("general.quantization_version", GgufValue.u32(2));
        md.put("tokenizer.ggml.model", GgufValue.string("none"));

        var out = new ArrayList<Planned>();
        // LlamaModel.generate_extra_tensors: written before the checkpoint's own
        if (llama && ropeType.equalsIgnoreCase("llama3"))
            out.add(new Planned("rope_freqs.weight", new long[]{d / 2}, GgmlType.F32, null, llama3Factors(rope, theta, d)));
        var sorted = new ArrayList<>(hfTensors);
        sorted.sort(Comparator.comparing(HfTensor::name));
        for (var t : sorted) {
            String n = t.name();
            if (n.equals("lm_head.weight")) {
                out.add(planned("output.weight", HfConfigInts.ne(t.shape()), t, null, outType));
                continue;
            }
            if (n.equals("model.embed_tokens.weight")) {
                out.add(planned("token_embd.weight", HfConfigInts.ne(t.shape()), t, null, outType));
                continue;
            }
            if (n.equals("model.norm.weight")) {
                out.add(planned("output_norm.weight", HfConfigInts.ne(t.shape()), t, null, outType));
                continue;
            }
            var m = LAYER.matcher(n);
            String g = m.matches() ? PER_LAYER.get(m.group(2)) : null;
            if (g == null) throw new GgufException(configFile.resolveSibling(""), "tensor '" + n + "' has no place in llama.cpp's " + arch + " model");
            String rest = m.group(2);
            long[] ne = HfConfigInts.ne(t.shape());
            GgufPlan.Derived derived = null;
            if (llama && (rest.startsWith("self_attn.q_proj.") || rest.startsWith("self_attn.k_proj."))) {
                long row = ne.length > 1 ? ne[0] : 1;
                var perm = new HeadPermutation(d);
                derived = new GgufPlan.Derived(List.of(n), i -> perm.sourceRow(i / row) * row + i % row, GgufPlan.Derived.IDENTITY);
            }
            out.add(planned("blk." + m.group(1) + "." + g, ne, t, derived, outType));
        }
        var seen = new HashSet<String>();
        for (var p : out) if (!seen.add(p.name())) throw new GgufException(configFile.resolveSibling(""), "two tensors map to '" + p.name() + "'");
        return new LlamaGgufPlan(md, out);
    }

    /**
     * LlamaModel.permute within heads of d rows: GGUF row 2i + j of a head holds transformers' row j·d/2 + i. The
     * converter's n_head (or n_head_kv for k) only groups whole heads, so the head size alone fixes the map.
     */
    public record HeadPermutation(int d) {
        /** The checkpoint row GGUF row p comes from. */
        public long sourceRow(long p) {
            long head = p / d, w = p % d;
            return head * d + (w % 2) * (d / 2) + w / 2;
        }
    }

    /**
     * The converter's llama3 rope factors, in its float32 arithmetic: freqs = 1/(base^(arange(0,d,2)/d)); per
     * frequency, wavelen = 2π/freq; 1 below high_freq_wavelen, factor above low_freq_wavelen, else
     * 1/((1−smooth)/factor + smooth) with smooth = (old_context_len/wavelen − low)/(high − low).
     */
    static float[] llama3Factors(JsonNode rope, JsonNode theta, int d) {
        float base = (float) (theta != null && theta.isNumber() ? theta.asDouble() : 10000.0);
        double factor = rope.path("factor").asDouble(8.0), low = rope.path("low_freq_factor").asDouble(1.0),
                high = rope.path("high_freq_factor").asDouble(4.0);
        double old = rope.path("original_max_position_embeddings").asDouble(8192);
        double lowWavelen = old / low, highWavelen = old / high;
        var out = new float[d / 2];
        for (int j = 0; j < d / 2; j++) {
            float exponent = (float) (2 * j) / d;
            float freq = 1f / (float) Math.pow(base, exponent);
            float wavelen = (float) (2 * Math.PI) / freq;
            if (wavelen < highWavelen) out[j] = 1f;
            else if (wavelen > lowWavelen) out[j] = (float) factor;
            else {
                float smooth = ((float) old / wavelen - (float) low) / (float) (high - low);
                out[j] = 1f / ((1f - smooth) / (float) factor + smooth);
            }
        }
        return out;
    }

    private static Planned planned(String g, long[] ne, HfTensor t, GgufPlan.Derived d, GgufOutputType outType) {
        var type = Qwen35GgufPlan.typeOf(g, ne, outType);
        if (type.blockSize() > 1 && ne[0] % type.blockSize() != 0) type = GgmlType.F16;
        return new Planned(g, ne, type, t.name(), null, d);
    }


}
