package dev.decodiff.engine;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The gemma4_text configuration, read from config.json in both forms transformers writes
 * (5.5–5.7: global_head_dim + num_global_key_value_heads; 5.17: per_layer_config), with 5.17's defaults
 * for absent keys. Values the engine cannot honour are refused, not ignored.
 */
public record Gemma4Config(
        int vocabSize, int hidden, int numLayers, int numHeads, float rmsNormEps, float finalLogitSoftcap,
        boolean tieWordEmbeddings, int pleDim, int pleVocab, int numKvSharedLayers, boolean doubleWideMlp,
        boolean moe, int numExperts, int topKExperts, int moeIntermediate, boolean attentionBias,
        int slidingWindow, RopeSpec slidingRope, RopeSpec fullRope, List<LayerSpec> layers, int maxPositions) {

    /** transformers' default max_position_embeddings for gemma4_text. */
    public static final int DEFAULT_MAX_POSITIONS = 131072;

    public LayerSpec layer(int i) { return layers.get(i); }

    public boolean hasSoftcap() { return !Float.isNaN(finalLogitSoftcap); }

    public boolean hasPle() { return pleDim > 0; }

    public RopeSpec rope(LayerType t) { return t == LayerType.SLIDING ? slidingRope : fullRope; }

    /** The first layer of index ≥ 0 that is KV-shared, or numLayers when none is. */
    public int firstKvShared() { return numLayers - numKvSharedLayers; }

    public static Gemma4Config read(Path file) {
        JsonNode root;
        try {
            // A key given twice ("sliding_window" twice) is an ambiguous config, not "the last one wins".
            root = new ObjectMapper().enable(com.fasterxml.jackson.core.JsonParser.Feature.STRICT_DUPLICATE_DETECTION)
                    .readTree(Files.readString(file));
        } catch (IOException e) {
            throw new CheckpointException(file + (e instanceof com.fasterxml.jackson.core.JsonProcessingException ? ": is not valid JSON: " : ": cannot read config.json: ")
                    + dev.decodiff.metal.JsonErrors.plain(e), e);
        }
        return parse(root, file.toString());
    }

    public static Gemma4Config parse(JsonNode root, String file) {
        if (root == null || !root.isObject()) throw new CheckpointException(file + ": config.json is not a JSON object");
        JsonNode c = root;
        String modelType = root.path("model_type").asText("");
        if (root.has("text_config") && !modelType.equals("gemma4_text")) c = root.get("text_config");
        String textType = c.path("model_type").asText(modelType);
        if (!textType.equals("gemma4_text") && !textType.equals("gemma4"))
            throw new CheckpointException(file + ": model_type '" + textType + "' is not a Gemma 4 text model (expected gemma4_text, or gemma4 with a text_config)");

        var r = new Reader(c, file);
        String act = r.str("hidden_activation", "gelu_pytorch_tanh");
        if (!act.equals("gelu_pytorch_tanh"))
            throw new CheckpointException(file + ": hidden_activation '" + act + "' is not supported (only gelu_pytorch_tanh)");
        JsonNode bidir = c.get("use_bidirectional_attention");
        if (bidir != null && !bidir.isNull() && !bidir.asText().equals("vision"))
            throw new CheckpointException(file + ": use_bidirectional_attention='" + bidir.asText()
                    + "' is not supported by this engine (causal text decoding only)");

        int vocab = r.positive("vocab_size", 262144);
        int hidden = r.positive("hidden_size", 2304);
        int L = r.positive("num_hidden_layers", 30);
        int nh = r.positive("num_attention_heads", 8);
        int nkv = r.positive("num_key_value_heads", 4);
        int headDim = r.positive("head_dim", 256);
        int globalHeadDim = r.positive("global_head_dim", 512);
        int maxPositions = r.positive("max_position_embeddings", DEFAULT_MAX_POSITIONS);
        boolean kEqV = r.bool("attention_k_eq_v", false);
        Integer nkvGlobal = r.optInt("num_global_key_value_heads");
        int intermediate = r.positive("intermediate_size", 9216);
        // A window of 0 would let a sliding layer attend to nothing (softmax over no keys): refused, not computed.
        int window = r.positive("sliding_window", 512);
        float eps = (float) r.d("rms_norm_eps", 1e-6);
        Double softcap = r.optDouble("final_logit_softcapping");
        boolean tie = r.bool("tie_word_embeddings", true);
        Integer ple = c.has("hidden_size_per_layer_input") ? r.optInt("hidden_size_per_layer_input") : Integer.valueOf(256);
        int pleDim = ple == null ? 0 : ple;
        if (pleDim < 0) throw new CheckpointException(file + ": hidden_size_per_layer_input=" + pleDim + " must be ≥ 0 (0 = no per-layer inputs)");
        int pleVocab = pleDim > 0 ? r.positive("vocab_size_per_layer_input", 262144) : r.i("vocab_size_per_layer_input", 262144);
        int nShared = r.i("num_kv_shared_layers", 0);
        boolean doubleWide = r.bool("use_double_wide_mlp", false);
        boolean moe = r.bool("enable_moe_block", false);
        int E = moe ? r.required("num_experts") : 0;
        int K = moe ? r.required("top_k_experts") : 0;
        int Im = moe ? r.required("moe_intermediate_size") : 0;
        if (moe && (E < 1 || K < 1 || K > E || Im < 1))
            throw new CheckpointException(file + ": MoE geometry num_experts=" + E + ", top_k_experts=" + K + ", moe_intermediate_size=" + Im
                    + " is impossible (needs 1 ≤ top_k_experts ≤ num_experts and a positive size)");
        boolean bias = r.bool("attention_bias", false);

        var types = new ArrayList<LayerType>();
        JsonNode lt = c.get("layer_types");
        if (lt != null && !lt.isNull()) {
            if (!lt.isArray() || lt.size() != L)
                throw new CheckpointException(file + ": layer_types must list " + L + " entries (num_hidden_layers), has " + lt.size());
            lt.forEach(n -> types.add(LayerType.fromConfig(n.asText(), file)));
        } else {
            for (int i = 0; i < L; i++) types.add((i + 1) % 6 == 0 ? LayerType.FULL : LayerType.SLIDING);
        }
        // transformers forces the last layer to full attention whatever the config says.
        if (L > 0) types.set(L - 1, LayerType.FULL);

        RopeSpec slidingRope = RopeSpec.defaultRope(1e4);
        RopeSpec fullRope = RopeSpec.proportional(1e6, 0.25, 1.0);
        JsonNode rp = c.get("rope_parameters");
        if (rp != null && !rp.isNull()) {
            if (rp.has("sliding_attention")) slidingRope = rope(rp.get("sliding_attention"), file, "sliding_attention");
            if (rp.has("full_attention")) fullRope = rope(rp.get("full_attention"), file, "full_attention");
        }

        JsonNode plc = c.get("per_layer_config");
        if (nShared < 0 || nShared >= L && L > 0)
            throw new CheckpointException(file + ": num_kv_shared_layers=" + nShared + " must be in [0, num_hidden_layers)");
        int firstShared = L - nShared;
        var layers = new ArrayList<LayerSpec>();
        for (int i = 0; i < L; i++) {
            LayerType t = types.get(i);
            int d = headDim, kv = nkv;
            boolean layerKEqV = kEqV && t == LayerType.FULL;
            boolean perLayer = plc != null && !plc.isNull();
            // transformers 5.17 takes per_layer_config verbatim: a layer it lists takes the global head_dim and KV heads
            // for what its entry leaves out (save_pretrained omits what equals them), never global_head_dim's default
            if (t == LayerType.FULL && !perLayer) {
                d = globalHeadDim;
                if (kEqV) {
                    if (nkvGlobal != null) kv = nkvGlobal;
                }
            }
            if (perLayer && plc.has(Integer.toString(i))) {
                JsonNode o = plc.get(Integer.toString(i));
                var lr = new Reader(o, file + ": per_layer_config." + i);
                d = lr.positive("head_dim", d);
                kv = lr.positive("num_key_value_heads", kv);
            }
            if (kv < 1) throw new CheckpointException(file + ": layer " + i + " has " + kv + " KV heads; it needs at least one");
            if (nh % kv != 0)
                throw new CheckpointException(file + ": layer " + i + " has " + nh + " query heads and " + kv + " KV heads; GQA needs a whole ratio");
            int src = i;
            if (nShared > 0 && i >= firstShared) {
                src = -1;
                for (int j = firstShared - 1; j >= 0; j--) if (types.get(j) == t) { src = j; break; }
                if (src < 0)
                    throw new CheckpointException(file + ": KV-shared layer " + i + " (" + t.configName() + ") has no earlier non-shared layer of its type");
            }
            int inter = doubleWide && nShared > 0 && i >= firstShared ? 2 * intermediate : intermediate;
            layers.add(new LayerSpec(i, t, d, kv, inter, layerKEqV, src));
        }
        return new Gemma4Config(vocab, hidden, L, nh, eps, softcap == null ? Float.NaN : softcap.floatValue(), tie,
                pleDim, pleVocab, nShared, doubleWide, moe, E, K, Im, bias, window, slidingRope, fullRope, List.copyOf(layers), maxPositions);
    }

    private static RopeSpec rope(JsonNode n, String file, String which) {
        String type = n.path("rope_type").asText("default");
        double theta = n.path("rope_theta").asDouble(which.equals("full_attention") ? 1e6 : 1e4);
        return switch (type) {
            case "default" -> RopeSpec.defaultRope(theta);
            case "proportional" -> RopeSpec.proportional(theta, n.path("partial_rotary_factor").asDouble(1.0), n.path("factor").asDouble(1.0));
            default -> throw new CheckpointException(file + ": rope_parameters." + which + ".rope_type '" + type
                    + "' is not supported (supported: default, proportional)");
        };
    }

    private record Reader(JsonNode c, String file) {
        /**
         * An integer key, strictly: 1e12 or 3.5 is refused with its name, not truncated by asInt into a different
         * number (1e12 would otherwise become a vocabulary of -727,379,968).
         */
        int i(String k, int def) {
            JsonNode n = c.get(k);
            if (n == null || n.isNull()) return def;
            if (!n.isIntegralNumber() || !n.canConvertToInt())
                throw new CheckpointException(file + ": '" + k + "' = " + n + " is not an integer in range (at most " + Integer.MAX_VALUE + "); fix config.json");
            return n.intValue();
        }

        int positive(String k, int def) {
            int v = i(k, def);
            if (v < 1) throw new CheckpointException(file + ": '" + k + "' = " + v + " must be ≥ 1; fix config.json");
            return v;
        }

        double d(String k, double def) { JsonNode n = c.get(k); return n == null || n.isNull() ? def : n.asDouble(); }

        boolean bool(String k, boolean def) { JsonNode n = c.get(k); return n == null || n.isNull() ? def : n.asBoolean(); }

        String str(String k, String def) { JsonNode n = c.get(k); return n == null || n.isNull() ? def : n.asText(); }

        Integer optInt(String k) { JsonNode n = c.get(k); return n == null || n.isNull() ? null : n.asInt(); }

        Double optDouble(String k) { JsonNode n = c.get(k); return n == null || n.isNull() ? null : n.asDouble(); }

        int required(String k) {
            JsonNode n = c.get(k);
            if (n == null || n.isNull()) throw new CheckpointException(file + ": '" + k + "' is required when enable_moe_block is true");
            return i(k, 0);
        }
    }
}
