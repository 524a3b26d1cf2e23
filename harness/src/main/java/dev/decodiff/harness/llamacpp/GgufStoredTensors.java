package dev.decodiff.harness.llamacpp;

import dev.decodiff.engine.CheckpointFiles;
import dev.decodiff.engine.ops.StoredMatrices;
import dev.decodiff.llamacpp.gguf.GgmlQuants;
import dev.decodiff.llamacpp.gguf.GgmlRounding;
import dev.decodiff.llamacpp.gguf.GgmlType;
import dev.decodiff.llamacpp.gguf.GgufFile;
import dev.decodiff.llamacpp.gguf.GgufOutputType;
import dev.decodiff.llamacpp.gguf.GgufPlan;
import dev.decodiff.llamacpp.gguf.HfToGguf;
import dev.decodiff.metal.WeightMatrix;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The matrices a GGUF stores for a checkpoint, read back for the precision hypothesis "ggml's matmuls on the GGUF's
 * matrices" ({@link StoredMatrices}), whatever the architecture: every non-F32 matrix of a type the GGUF reader
 * dequantizes, its values as ggml dequantizes them, put back into the checkpoint's tensors by inverting the converter's
 * plan ({@link HfToGguf#plan}: llama's q/k head permutation, Qwen3.5's value-head reordering, expert stacks and splits)
 * — not the checkpoint's weights quantized again, since llama_model_quantize picks its own type per matrix and
 * quantizes the reordered rows, whose blocks are not the checkpoint's.
 * <p>Before a tensor is taken it is checked against the checkpoint's own values, block by block in the GGUF's order
 * (the quantizer's blocks): every element must be within its type's rounding of the checkpoint's value
 * ({@link GgmlRounding}). A tensor that is not — a wrong matrix, a corrupted or rewritten row — is rejected with the
 * reason, and every checkpoint tensor it holds a part of is left out, so no cell is excused by it.
 * <p>Each architecture then names its matrices: {@link #bind} ties a checkpoint tensor (by its name below the text
 * model's prefix, at an element offset for a slice of a stack) to the engine's {@link WeightMatrix}.
 */
public final class GgufStoredTensors {
    /** Per checkpoint tensor (full name): its values in the checkpoint's order. */
    private final Map<String, float[]> values = new HashMap<>();
    /** Per checkpoint tensor: the ggml type of the GGUF tensors holding it (null where its parts differ). */
    private final Map<String, GgmlType> types = new HashMap<>();
    /** The checkpoint's tensor names by their name below the text model's prefix. */
    private final Map<String, String> byText = new HashMap<>();
    private final List<StoredMatrices.Rejected> rejected = new ArrayList<>();
    private final Map<WeightMatrix, StoredMatrices.Stored> bound = new IdentityHashMap<>();

    private GgufStoredTensors() {}

    /** The GGUF's stored matrices for the checkpoint folder {@code checkpoint} it was made from (or claims to be). */
    public static GgufStoredTensors read(Path gguf, Path checkpoint) {
        var out = new GgufStoredTensors();
        var file = GgufFile.read(gguf);
        var mixed = new HashSet<String>();
        var dropped = new HashSet<String>();
        try (var files = CheckpointFiles.open(checkpoint)) {
            var plan = HfToGguf.plan(checkpoint, files, GgufOutputType.F32);
            for (var p : plan.tensors()) {
                if (!file.hasTensor(p.name()) || p.source() == null && p.derived() == null) continue;
                var info = file.tensor(p.name());
                var type = info.type();
                if (type == GgmlType.F32 || p.ne().length < 2 || !GgmlQuants.dequantizes(type)) continue;
                var d = p.derived();
                if (d != null && d.op() != GgufPlan.Derived.IDENTITY) continue; // computed values (norm +1, −exp): no matrix
                var sources = d == null ? List.of(p.source()) : d.sources();
                if (!Arrays.equals(info.ne(), p.ne())) {
                    out.reject(dropped, sources, p.name(), type, "has shape " + info.shapeString() + " where the checkpoint's is " + Arrays.toString(p.ne()));
                    continue;
                }
                float[] stored = file.floats(p.name());
                int per = stored.length / sources.size();
                float[] original = new float[stored.length];
                for (int s = 0; s < sources.size(); s++) {
                    var src = files.all().get(sources.get(s));
                    for (int i = 0; i < per; i++) original[s * per + i] = src.getFloat(d == null ? i : d.index().applyAsLong(i));
                }
                String why = GgmlRounding.bounds(type) ? GgmlRounding.check(type, original, stored, Math.toIntExact(p.ne()[0])) : "has no rounding bound";
                if (why != null) {
                    out.reject(dropped, sources, p.name(), type, why);
                    continue;
                }
                for (int s = 0; s < sources.size(); s++) {
                    String src = sources.get(s);
                    float[] dst = out.values.computeIfAbsent(src, n -> new float[Math.toIntExact(files.all().get(n).elementCount())]);
                    if (out.types.containsKey(src) && out.types.get(src) != type) mixed.add(src);
                    out.types.put(src, type);
                    for (int i = 0; i < per; i++) dst[d == null ? i : (int) d.index().applyAsLong(i)] = stored[s * per + i];
                }
            }
        }
        for (String m : mixed) out.types.remove(m);
        for (String n : dropped) {
            out.values.remove(n);
            out.types.remove(n);
        }
        for (String full : out.values.keySet()) out.byText.put(textName(full), full);
        return out;
    }

    private void reject(Set<String> dropped, List<String> sources, String tensor, GgmlType type, String why) {
        dropped.addAll(sources);
        rejected.add(new StoredMatrices.Rejected(tensor, type.name(), why));
    }

    /** Whether the GGUF holds (and this reader took) the checkpoint tensor {@code text}, named below the text model's prefix. */
    public boolean has(String text) { return byText.containsKey(text); }

    /**
     * Binds the embedding (embed_tokens) and the head (lm_head) where it is its own matrix: a tied head is the embedding
     * matrix itself, as llama.cpp multiplies token_embd for the output.
     */
    public GgufStoredTensors bindEmbeddingAndHead(WeightMatrix embed, WeightMatrix head) {
        bind("embed_tokens.weight", embed);
        return head == embed ? this : bind("lm_head.weight", head);
    }

    /** Binds {@code m} to the whole stored tensor {@code text}. */
    public GgufStoredTensors bind(String text, WeightMatrix m) { return bind(text, m, 0); }

    /**
     * Binds {@code m} to the stored tensor {@code text} (named below the text model's prefix) from element {@code offset}
     * on, its rows × cols values: nothing where the tensor is not taken (absent, F32, rejected) or its type's input
     * conversion is not modelled.
     */
    public GgufStoredTensors bind(String text, WeightMatrix m, long offset) {
        String full = byText.get(text);
        if (m == null || full == null) return this;
        var type = types.get(full);
        var conversion = type == null ? null : StoredMatrices.InputConversion.of(type.name());
        if (conversion == null) return this;
        int n = m.rows() * m.cols();
        float[] w = Arrays.copyOfRange(values.get(full), Math.toIntExact(offset), Math.toIntExact(offset + n));
        bound.put(m, new StoredMatrices.Stored(w, type.name(), conversion));
        return this;
    }

    /** The matrices bound so far, and the tensors rejected. */
    public StoredMatrices matrices() { return new StoredMatrices(bound, rejected); }

    /** The name below the text model's prefix, as the weights are addressed here. */
    private static String textName(String name) {
        for (String prefix : new String[]{"model.language_model.", "model."})
            if (name.startsWith(prefix)) return name.substring(prefix.length());
        return name;
    }
}
