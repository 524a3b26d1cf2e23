package dev.decodiff.llamacpp.gguf;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.decodiff.metal.SafetensorsWriter;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The weights of a Gemma 4 GGUF as a float32 Hugging Face checkpoint folder (config.json + model.safetensors, names
 * under "model."), so that decodiff's engine runs exactly the weights llama.cpp runs: every tensor dequantized as
 * ggml does ({@link GgmlQuants}), the config rebuilt from the gemma4.* metadata (the inverse of
 * {@link Gemma4GgufPlan}: layer types from the sliding-window pattern, the full layers' partial rotation from
 * rope_freqs, k_eq_v from full layers without attn_v, a tied head when output.weight is absent). config.json also
 * records the GGUF it came from ("decodiff_gguf": its sha256 and matrix types), so the folder's hashes depend only
 * on the GGUF's bytes; {@value dev.decodiff.engine.ops.StoredTypes#FILE} beside it names each matrix's ggml type (not
 * hashed), for the precision hypothesis of ggml's quantized matmul inputs.
 */
public final class GgufToCheckpoint {
    /** Changes whenever the folders this writes change; a cache of converted folders keys on it. */
    public static final int REVISION = 2;
    public static final String SOURCE_KEY = "decodiff_gguf";

    private GgufToCheckpoint() {}

    /** The matrix types of a GGUF by count ("Q4_K" → 30), the 1-D and norm tensors left out. */
    public static Map<String, Integer> matrixTypes(GgufFile g) {
        var out = new TreeMap<String, Integer>();
        for (var t : g.tensors()) if (t.ne().length >= 2) out.merge(t.type().name(), 1, Integer::sum);
        return out;
    }

    public static void convert(GgufFile g, String sha256, Path dir) {
        String a = "gemma4.";
        Path file = g.path();
        var arch = val(g, "general.architecture");
        if (arch == null || !arch.asString().equals("gemma4"))
            throw new GgufException(file, "is not a Gemma 4 GGUF (general.architecture " + (arch == null ? "absent" : arch.describe()) + ")");
        for (var t : g.tensors())
            if (!GgmlQuants.dequantizes(t.type()))
                throw new GgufException(file, "tensor '" + t.name() + "' is " + t.type() + "; decodiff dequantizes " + GgmlQuants.SUPPORTED + " — requantize with one of them");
        int L = (int) num(g, a + "block_count");
        int hidden = (int) num(g, a + "embedding_length");
        int headDimFull = (int) num(g, a + "attention.key_length");
        int headDim = (int) num(g, a + "attention.key_length_swa");
        var pattern = g.get(a + "attention.sliding_window_pattern").asList();
        var kv = perLayer(g, a + "attention.head_count_kv", L);
        var ffn = perLayer(g, a + "feed_forward_length", L);
        int nShared = (int) opt(g, a + "attention.shared_kv_layers", 0);
        var types = new ArrayList<String>();
        for (int i = 0; i < L; i++) types.add((Boolean) pattern.get(i) ? "sliding_attention" : "full_attention");

        var json = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);
        ObjectNode c = json.createObjectNode();
        c.putArray("architectures").add("Gemma4ForCausalLM");
        c.put("model_type", "gemma4_text");
        c.put("dtype", "float32");
        c.put("attention_bias", false);
        int firstFull = types.indexOf("full_attention");
        boolean kEqV = firstFull >= 0 && !g.hasTensor("blk." + firstFull + ".attn_v.weight");
        c.put("attention_k_eq_v", kEqV);
        boolean moe = val(g, a + "expert_count") != null;
        c.put("enable_moe_block", moe);
        if (moe) {
            c.put("num_experts", num(g, a + "expert_count"));
            c.put("top_k_experts", num(g, a + "expert_used_count"));
            c.put("moe_intermediate_size", num(g, a + "expert_feed_forward_length"));
        }
        var softcap = val(g, a + "final_logit_softcapping");
        if (softcap != null) c.put("final_logit_softcapping", softcap.asDouble());
        else c.putNull("final_logit_softcapping");
        c.put("head_dim", headDim);
        c.put("hidden_activation", "gelu_pytorch_tanh");
        c.put("hidden_size", hidden);
        c.put("hidden_size_per_layer_input", opt(g, a + "embedding_length_per_layer_input", 0));
        c.put("intermediate_size", ffn.get(0));
        var lt = c.putArray("layer_types");
        types.forEach(lt::add);
        c.put("max_position_embeddings", num(g, a + "context_length"));
        c.put("num_attention_heads", num(g, a + "attention.head_count"));
        c.put("num_hidden_layers", L);
        long slidingKv = kv.get(types.indexOf("sliding_attention") >= 0 ? types.indexOf("sliding_attention") : 0);
        c.put("num_key_value_heads", slidingKv);
        c.put("num_kv_shared_layers", nShared);
        var plc = c.putObject("per_layer_config");
        for (int i = 0; i < L; i++)
            if (types.get(i).equals("full_attention")) plc.putObject(Integer.toString(i)).put("head_dim", headDimFull).put("num_key_value_heads", kv.get(i));
        c.put("rms_norm_eps", shortest(g.get(a + "attention.layer_norm_rms_epsilon").asDouble()));
        var rp = c.putObject("rope_parameters");
        var freqs = g.hasTensor("rope_freqs.weight") ? g.floats("rope_freqs.weight") : null;
        int rotated = 0;
        if (freqs != null) for (float f : freqs) if (f == 1.0f) rotated++;
        rp.putObject("full_attention").put("partial_rotary_factor", freqs == null ? 1.0 : 2.0 * rotated / headDimFull)
                .put("rope_theta", shortest(g.get(a + "rope.freq_base").asDouble())).put("rope_type", "proportional");
        rp.putObject("sliding_attention").put("rope_theta", shortest(g.get(a + "rope.freq_base_swa").asDouble())).put("rope_type", "default");
        c.put("sliding_window", num(g, a + "attention.sliding_window"));
        c.put("tie_word_embeddings", !g.hasTensor("output.weight"));
        boolean doubleWide = false;
        for (int i = L - nShared; i < L; i++) if (ffn.get(i) == 2L * ffn.get(0)) doubleWide = true;
        c.put("use_double_wide_mlp", doubleWide);
        c.put("vocab_size", g.tensor("token_embd.weight").ne()[1]);
        c.put("vocab_size_per_layer_input", g.hasTensor("per_layer_token_embd.weight") ? g.tensor("per_layer_token_embd.weight").ne()[1] : c.get("vocab_size").asLong());
        var src = c.putObject(SOURCE_KEY);
        src.put("sha256", sha256);
        var tt = src.putObject("matrix_types");
        matrixTypes(g).forEach(tt::put);

        try {
            Files.createDirectories(dir);
            try (var w = SafetensorsWriter.spillingTo(dir.resolve("model.safetensors.spill"))) {
                for (var t : g.tensors()) {
                    if (t.name().equals("rope_freqs.weight")) continue;
                    String hf = Gemma4TensorNames.hfName(t.name());
                    if (hf == null) throw new GgufException(file, "tensor '" + t.name() + "' has no place in a Gemma 4 text checkpoint");
                    long[] ne = t.ne();
                    long[] shape = new long[ne.length];
                    for (int i = 0; i < ne.length; i++) shape[i] = ne[ne.length - 1 - i];
                    w.add(hf.equals("lm_head.weight") ? hf : "model." + hf, shape, g.floats(t.name()));
                }
                w.write(dir.resolve("model.safetensors"), Map.of("format", "pt"));
            }
            Files.deleteIfExists(dir.resolve("model.safetensors.spill"));
            json.writeValue(dir.resolve("config.json").toFile(), c);
            var stored = new TreeMap<String, String>();
            for (var t : g.tensors()) {
                String hf = Gemma4TensorNames.hfName(t.name());
                if (t.ne().length >= 2 && hf != null) stored.put(hf, t.type().name());
            }
            json.writeValue(dir.resolve(dev.decodiff.engine.ops.StoredTypes.FILE).toFile(), stored);
        } catch (IOException e) {
            throw new GgufException(dir, "cannot write the checkpoint of " + file + ": " + e.getMessage(), e);
        }
    }

    private static GgufValue val(GgufFile g, String key) { return g.metadata().get(key); }

    /** A GGUF float32 as the shortest decimal that reads back to it (1e-06, not 9.999999974752427e-07). */
    private static double shortest(double f32) { return Double.parseDouble(Float.toString((float) f32)); }

    private static long num(GgufFile g, String key) {
        var v = val(g, key);
        if (v == null) throw new GgufException(g.path(), "has no " + key + "; not a Gemma 4 GGUF as llama.cpp's converter writes it");
        return v.asLong();
    }

    private static long opt(GgufFile g, String key, long def) {
        var v = val(g, key);
        return v == null ? def : v.asLong();
    }

    /** A per-layer integer given once (u32) or per layer (an array). */
    private static List<Long> perLayer(GgufFile g, String key, int L) {
        var v = val(g, key);
        if (v == null) throw new GgufException(g.path(), "has no " + key);
        var out = new ArrayList<Long>();
        if (v.type() == GgufValueType.ARRAY) {
            for (Object o : v.asList()) out.add((Long) o);
            if (out.size() != L) throw new GgufException(g.path(), key + " lists " + out.size() + " layers, block_count is " + L);
        } else for (int i = 0; i < L; i++) out.add(v.asLong());
        return out;
    }
}
