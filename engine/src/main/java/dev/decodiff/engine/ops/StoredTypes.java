package dev.decodiff.engine.ops;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.engine.CheckpointException;
import dev.decodiff.engine.ModelWeights;
import dev.decodiff.metal.WeightMatrix;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.IdentityHashMap;
import java.util.Map;

/**
 * The ggml type each weight matrix had in the GGUF a checkpoint folder was made from ({@value #FILE} beside
 * config.json, tensor name → type name, written when a GGUF is converted), and from it the type ggml quantizes a
 * matmul's input to before its dot products with that matrix (its CPU backend's vec_dot_type): 32-value q8_0 blocks
 * for Q4_0, Q5_0 and Q8_0, q8_1 for Q4_1 and Q5_1, 256-value q8_K blocks for the K-quants; none for float matrices.
 * Outside the hashed files, so the folder's identity is the GGUF's alone.
 */
public final class StoredTypes {
    public static final String FILE = "matrix-types.json";

    /** A matmul input's conversion before ggml's vec-dot kernel. */
    public enum VecDot {
        /** float weights: the input stays as it is (a float matmul input is {@link Precision#matmulInput()}'s concern). */
        NONE,
        /** blocks of 32, one fp16 scale (quantize_row_q8_0). */
        Q8_0,
        /** blocks of 32, fp16 scale and fp16 scaled sum (quantize_row_q8_1; the sum only enters with the weights' minimum). */
        Q8_1,
        /** blocks of 256, one fp32 scale from the signed extreme (quantize_row_q8_K). */
        Q8_K;

        public static VecDot of(String ggmlType) {
            return switch (ggmlType) {
                case "Q4_0", "Q5_0", "Q8_0" -> Q8_0;
                case "Q4_1", "Q5_1" -> Q8_1;
                case "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K" -> Q8_K;
                default -> NONE;
            };
        }
    }

    private final Map<WeightMatrix, VecDot> byMatrix;

    private StoredTypes(Map<WeightMatrix, VecDot> byMatrix) { this.byMatrix = byMatrix; }

    /** Unknown types: every matrix taken as quantized with a 32-value block type (q8_0 inputs). */
    static final StoredTypes UNKNOWN = new StoredTypes(null);

    /** The vec-dot conversion of a matrix's input. */
    VecDot of(WeightMatrix m) {
        if (byMatrix == null) return VecDot.Q8_0;
        var v = byMatrix.get(m);
        return v == null ? VecDot.NONE : v;
    }

    public boolean known() { return byMatrix != null; }

    /** The types of {@code dir}'s matrices, or {@link #UNKNOWN} when the folder was not made from a GGUF. */
    static StoredTypes read(Path dir, ModelWeights w) {
        Path f = dir == null ? null : dir.resolve(FILE);
        if (f == null || !Files.isRegularFile(f)) return UNKNOWN;
        Map<String, String> names;
        try {
            names = new ObjectMapper().readValue(f.toFile(), new com.fasterxml.jackson.core.type.TypeReference<Map<String, String>>() {});
        } catch (IOException e) {
            throw new CheckpointException(f + ": not a map of tensor names to ggml types (" + e.getMessage().lines().findFirst().orElse("")
                    + "); delete the folder to have it converted again");
        }
        var out = new IdentityHashMap<WeightMatrix, VecDot>();
        put(out, w.embed(), names, "embed_tokens.weight");
        // a tied head is the embedding matrix itself, as llama.cpp multiplies token_embd for the output
        if (w.lmHead() != w.embed()) put(out, w.lmHead(), names, "lm_head.weight");
        put(out, w.pleModelProjection(), names, "per_layer_model_projection.weight");
        for (int i = 0; i < w.layers().size(); i++) {
            var l = w.layers().get(i);
            String p = "layers." + i + ".";
            put(out, l.q(), names, p + "self_attn.q_proj.weight");
            put(out, l.k(), names, p + "self_attn.k_proj.weight");
            put(out, l.v(), names, p + "self_attn.v_proj.weight");
            put(out, l.o(), names, p + "self_attn.o_proj.weight");
            put(out, l.gate(), names, p + "mlp.gate_proj.weight");
            put(out, l.up(), names, p + "mlp.up_proj.weight");
            put(out, l.down(), names, p + "mlp.down_proj.weight");
            put(out, l.pleGate(), names, p + "per_layer_input_gate.weight");
            put(out, l.pleProjection(), names, p + "per_layer_projection.weight");
            if (l.moe() != null) {
                put(out, l.moe().router(), names, p + "router.proj.weight");
                for (var e : l.moe().gate()) put(out, e, names, p + "experts.gate_up_proj");
                for (var e : l.moe().up()) put(out, e, names, p + "experts.gate_up_proj");
                for (var e : l.moe().down()) put(out, e, names, p + "experts.down_proj");
            }
        }
        return new StoredTypes(out);
    }

    private static void put(Map<WeightMatrix, VecDot> out, WeightMatrix m, Map<String, String> names, String name) {
        if (m == null) return;
        String t = names.get(name);
        if (t == null) t = names.get("model." + name);
        if (t != null) out.put(m, VecDot.of(t));
    }
}
