package dev.decodiff.llamacpp.gguf;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.decodiff.metal.DType;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What a Gemma 4 GGUF holds, decided from config.json, the tensor headers of the safetensors and the tokenizer,
 * before a byte is written: the metadata (keys, types and order as llama.cpp's Gemma4Model conversion writes
 * them) and each tensor's GGUF name, ggml shape and type. {@link HfToGguf} writes a plan; the tests check plans
 * of the real model shapes without any weights.
 *
 * <p>Weights are copied as they are: no norm "+1" (Gemma 4's RMSNorm multiplies by w, and the converter's
 * norm_shift is 0 for Gemma 4), no permutation, no transposition (a [out, in] weight is ggml ne {in, out}).
 * The only computed tensor is rope_freqs: 1 for the rotated pairs of a full layer's proportional RoPE and
 * 1e30 (a frequency that leaves the pair unrotated) for the rest.
 */
public record Gemma4GgufPlan(Map<String, GgufValue> metadata, List<Planned> tensors) implements GgufPlan {

    /** A safetensors tensor header: name (with the checkpoint's prefix), dtype, PyTorch shape. */
    public record HfTensor(String name, DType dtype, long[] shape) {}

    /**
     * One GGUF tensor: from the checkpoint tensor {@code source} (its first {@code ne}-worth of elements, which
     * is all of it except for a token embedding cut to the tokenizer), or the given {@code values}.
     */
    public record Planned(String name, long[] ne, GgmlType type, String source, float[] values, GgufPlan.Derived derived) {
        public Planned(String name, long[] ne, GgmlType type, String source, float[] values) {
            this(name, ne, type, source, values, null);
        }

        public long elementCount() {
            long n = 1;
            for (long d : ne) n = Math.multiplyExact(n, d);
            return n;
        }
    }

    public static final String ARCH = "gemma4";
    private static final List<String> NON_TEXT = List.of("vision", "audio", "embed_vision", "embed_audio", "multi_modal_projector");

    public static Gemma4GgufPlan of(String modelName, JsonNode configRoot, Path configFile, List<HfTensor> hfTensors,
                                    Gemma4Vocab vocab, GgufOutputType outType) {
        var h = hparams(configRoot, configFile);
        String a = ARCH + ".";
        int L = h.required("num_hidden_layers");
        var types = layerTypes(h, L);
        var perLayer = h.node("per_layer_config");
        int headDim = h.integer("head_dim", 256);
        Integer headDimFull = h.optInt("global_head_dim");
        if (headDimFull == null) headDimFull = firstFull(perLayer, types, "head_dim");
        // transformers 5.17 reads per_layer_config verbatim, a key its entry leaves out (save_pretrained omits what
        // equals the global) taking the global head_dim; llama.cpp's converter asserts here instead of converting
        if (headDimFull == null && perLayer != null && perLayer.isObject()) headDimFull = headDim;
        if (headDimFull == null) headDimFull = 512; // transformers' default when neither key is given
        Integer kvFull = h.optInt("num_global_key_value_heads");
        if (kvFull == null) kvFull = firstFull(perLayer, types, "num_key_value_heads");
        int kvSwa = h.integer("num_key_value_heads", 4);
        int nShared = h.integer("num_kv_shared_layers", 0);
        int intermediate = h.integer("intermediate_size", 9216);
        var ropeFull = h.c().path("rope_parameters").path("full_attention");
        var ropeSwa = h.c().path("rope_parameters").path("sliding_attention");
        if (!ropeFull.path("rope_type").asText("proportional").equals("proportional"))
            throw new GgufException(configFile, "rope_parameters.full_attention.rope_type is '" + ropeFull.path("rope_type").asText()
                    + "'; llama.cpp's gemma4 conversion handles only 'proportional' on full layers");
        if (h.c().path("attention_bias").asBoolean(false))
            throw new GgufException(configFile, "attention_bias is true; llama.cpp's gemma4 model has no attention bias tensors");
        String bidir = h.c().path("use_bidirectional_attention").asText("");
        if (!bidir.isEmpty() && !bidir.equals("null") && !bidir.equals("vision"))
            throw new GgufException(configFile, "use_bidirectional_attention='" + bidir + "' is not what llama.cpp's gemma4 model computes (causal)");

        var md = new LinkedHashMap<String, GgufValue>();
        md.put("general.architecture", GgufValue.string(ARCH));
        md.put("general.type", GgufValue.string("model"));
        md.put("general.name", GgufValue.string(modelName));
        // TextModel.set_gguf_parameters
        md.put(a + "block_count", GgufValue.u32(L));
        md.put(a + "context_length", GgufValue.u32(h.integer("max_position_embeddings", 131072)));
        md.put(a + "embedding_length", GgufValue.u32(h.required("hidden_size")));
        md.put(a + "feed_forward_length", GgufValue.u32(intermediate));
        md.put(a + "attention.head_count", GgufValue.u32(h.integer("num_attention_heads", 8)));
        md.put(a + "attention.head_count_kv", GgufValue.u32(kvSwa));
        md.put(a + "rope.freq_base", GgufValue.f32((float) ropeFull.path("rope_theta").asDouble(1_000_000.0)));
        md.put(a + "rope.freq_base_swa", GgufValue.f32((float) ropeSwa.path("rope_theta").asDouble(10_000.0)));
        md.put(a + "attention.layer_norm_rms_epsilon", GgufValue.f32((float) h.c().path("rms_norm_eps").asDouble(1e-6)));
        Integer experts = h.optInt("num_experts");
        Integer expertsUsed = h.optInt("top_k_experts");
        if (experts != null) md.put(a + "expert_count", GgufValue.u32(experts));
        if (expertsUsed != null) md.put(a + "expert_used_count", GgufValue.u32(expertsUsed));
        md.put(a + "attention.key_length", GgufValue.u32(headDim));
        md.put(a + "attention.value_length", GgufValue.u32(headDim));
        md.put("general.file_type", GgufValue.u32(outType.fileType()));
        // Gemma3Model.set_gguf_parameters
        double softcap = h.c().path("final_logit_softcapping").asDouble(0.0);
        if (softcap != 0.0) md.put(a + "final_logit_softcapping", GgufValue.f32((float) softcap));
        md.put(a + "attention.sliding_window", GgufValue.u32(h.integer("sliding_window", 512)));
        // Gemma4Model.set_gguf_parameters
        md.put(a + "attention.shared_kv_layers", GgufValue.u32(nShared));
        md.put(a + "embedding_length_per_layer_input", GgufValue.u32(pleDim(h)));
        md.put(a + "attention.sliding_window_pattern", GgufValue.boolArray(types.stream().map(t -> t.equals("sliding_attention")).toList()));
        md.put(a + "attention.key_length", GgufValue.u32(headDimFull));
        md.put(a + "attention.value_length", GgufValue.u32(headDimFull));
        md.put(a + "attention.key_length_swa", GgufValue.u32(headDim));
        md.put(a + "attention.value_length_swa", GgufValue.u32(headDim));
        Integer expertWidth = h.optInt("moe_intermediate_size");
        if (expertWidth == null) expertWidth = h.optInt("expert_intermediate_size");
        if (expertWidth != null) md.put(a + "expert_feed_forward_length", GgufValue.u32(expertWidth));
        if (h.c().path("use_double_wide_mlp").asBoolean(false)) {
            var ff = new ArrayList<Integer>();
            for (int i = 0; i < L; i++) ff.add(i < L - nShared ? intermediate : 2 * intermediate);
            md.put(a + "feed_forward_length", GgufValue.i32Array(ff));
        }
        if (kvFull != null) {
            int full = kvFull;
            md.put(a + "attention.head_count_kv", GgufValue.i32Array(types.stream().map(t -> t.equals("sliding_attention") ? kvSwa : full).toList()));
        }
        // Full layers rotate with rope_freqs, so their "rotary dimension" is the whole head; sliding layers rotate all of theirs.
        md.put(a + "rope.dimension_count", GgufValue.u32(headDimFull));
        md.put(a + "rope.dimension_count_swa", GgufValue.u32(headDim));
        md.put("general.quantization_version", GgufValue.u32(2));
        if (vocab != null) md.putAll(vocab.metadata());
        else {
            // No tokenizer: llama.cpp's "none" vocabulary with vocab_size dummy tokens; token ids are fed directly.
            md.put("tokenizer.ggml.model", GgufValue.string("none"));
            md.put(a + "vocab_size", GgufValue.u32(h.required("vocab_size")));
        }

        var out = new ArrayList<Planned>();
        out.add(ropeFreqs(configFile, ropeFull, headDimFull));
        var sorted = new ArrayList<>(hfTensors);
        sorted.sort(Comparator.comparing(HfTensor::name));
        for (var t : sorted) {
            String textName = textName(t.name());
            if (textName == null || textName.endsWith("rotary_emb.inv_freq")) continue;
            String g = Gemma4TensorNames.ggufName(textName);
            if (g == null)
                throw new GgufException(configFile.resolveSibling(""), "tensor '" + t.name() + "' has no place in llama.cpp's gemma4 model (not a Gemma 4 text checkpoint?)");
            long[] ne = HfConfigInts.ne(t.shape());
            if (g.equals("token_embd.weight") && vocab != null && vocab.embeddingRows() < ne[1]) ne[1] = vocab.embeddingRows();
            var type = typeOf(g, ne.length, outType);
            if (type.blockSize() > 1 && ne[0] % type.blockSize() != 0) type = GgmlType.F16;
            out.add(new Planned(g, ne, type, t.name(), null));
        }
        var seen = new java.util.HashSet<String>();
        for (var p : out) if (!seen.add(p.name())) throw new GgufException(configFile.resolveSibling(""), "two tensors map to '" + p.name() + "'");
        return new Gemma4GgufPlan(md, out);
    }

    /** The converter's rule: 1-D tensors, norms, the router matrix and non-".weight" tensors stay F32. */
    static GgmlType typeOf(String ggufName, int nDims, GgufOutputType outType) {
        if (nDims <= 1 || ggufName.endsWith("_norm.weight")) return GgmlType.F32;
        if (ggufName.endsWith(".ffn_gate_inp.weight") || !ggufName.endsWith(".weight")) return GgmlType.F32;
        return outType.matrixType();
    }

    private static Planned ropeFreqs(Path configFile, JsonNode ropeFull, int headDimFull) {
        double prf = ropeFull.path("partial_rotary_factor").asDouble(1.0);
        int rotated = (int) (headDimFull * prf / 2);
        int half = headDimFull / 2;
        if (rotated < 0 || rotated > half) throw new GgufException(configFile, "partial_rotary_factor " + prf + " is outside [0, 1]");
        var v = new float[half];
        Arrays.fill(v, 0, rotated, 1.0f);
        Arrays.fill(v, rotated, half, 1e30f);
        return new Planned("rope_freqs.weight", new long[]{half}, GgmlType.F32, null, v);
    }

    /** The name below "model." of a text-model tensor (the multimodal class's "language_model." dropped), or null for others. */
    static String textName(String name) {
        String n = name.replace("language_model.", "");
        if (n.equals("lm_head.weight")) return n;
        if (!n.startsWith("model.")) return null;
        n = n.substring("model.".length());
        for (String s : NON_TEXT) if (n.startsWith(s) || n.contains("." + s)) return null;
        return n;
    }


    private static int pleDim(HfConfigInts h) {
        // transformers turns PLE on (256) when the key is absent; 0 or null turn it off.
        if (!h.c().has("hidden_size_per_layer_input")) return 256;
        Integer p = h.optInt("hidden_size_per_layer_input");
        return p == null ? 0 : p;
    }

    private static List<String> layerTypes(HfConfigInts h, int L) {
        var lt = h.node("layer_types");
        var out = new ArrayList<String>();
        if (lt != null && lt.isArray()) {
            if (lt.size() != L) throw new GgufException(h.file(), "layer_types lists " + lt.size() + " layers, num_hidden_layers is " + L);
            for (JsonNode t : lt) {
                String s = t.asText();
                if (!s.equals("sliding_attention") && !s.equals("full_attention"))
                    throw new GgufException(h.file(), "layer_types has '" + s + "' (expected sliding_attention or full_attention)");
                out.add(s);
            }
        } else {
            for (int i = 0; i < L; i++) out.add((i + 1) % 6 == 0 || i == L - 1 ? "full_attention" : "sliding_attention");
        }
        return out;
    }

    /** The converter reads full-layer geometry from the first full layer listed in per_layer_config. */
    private static Integer firstFull(JsonNode perLayer, List<String> types, String key) {
        if (perLayer == null || !perLayer.isObject()) return null;
        for (var it = perLayer.fields(); it.hasNext(); ) {
            var e = it.next();
            int i;
            try {
                i = Integer.parseInt(e.getKey());
            } catch (NumberFormatException ex) {
                continue;
            }
            if (i >= 0 && i < types.size() && types.get(i).equals("full_attention") && e.getValue().has(key))
                return e.getValue().get(key).asInt();
        }
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
        if (!type.equals("gemma4_text") && !type.equals("gemma4"))
            throw new GgufException(file, "model_type '" + type + "' is not Gemma 4 (gemma4_text, or gemma4 with a text_config)");
        return new HfConfigInts(c, file);
    }

}
