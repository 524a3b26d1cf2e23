package dev.decodiff.engine.ops;

import dev.decodiff.engine.KvType;

import java.util.ArrayList;
import java.util.List;

/**
 * How an engine other than the exact fp32 one may compute an op: the rounding choices real engines make, each a
 * switch, so a precision hypothesis is one small change of the op, tested exactly like a bug variant.
 *
 * @param activations the format every intermediate is rounded to after each sub-op, as a framework running the whole
 *                    model in that dtype does (transformers or MLX in bf16: after every linear, norm, product, add)
 * @param matmulInput the format a matmul's input vector is converted to before the dot products (ggml does this to
 *                    match bf16 or f16 weights)
 * @param geluTable   GELU looked up in a 65,536-entry fp16 table at the fp16 rounding of x (ggml-cpu's default)
 * @param kvCache     the format keys and values are stored in and read back from
 * @param queryF16    the queries rounded to fp16 for the K·q products (ggml with an f16 cache)
 */
public record Precision(Format activations, Format matmulInput, boolean geluTable, KvStore kvCache, boolean queryF16) {
    public static final Precision EXACT = new Precision(Format.F32, Format.F32, false, KvStore.F32, false);

    /** How K/V rows come back from a cache: fp32, a float format, or one of llama.cpp's block quantizations. */
    public enum KvStore {
        F32, BF16, F16, Q8_0, Q4_0;

        public String id() { return name().toLowerCase(java.util.Locale.ROOT); }

        public KvType kvType() {
            return switch (this) {
                case F32 -> KvType.F32;
                case BF16 -> KvType.BF16;
                case Q8_0 -> KvType.Q8_0;
                case Q4_0 -> KvType.Q4_0;
                case F16 -> null;
            };
        }
    }

    public boolean exact() { return equals(EXACT); }

    public Precision withActivations(Format f) { return new Precision(f, matmulInput, geluTable, kvCache, queryF16); }

    public Precision withMatmulInput(Format f) { return new Precision(activations, f, geluTable, kvCache, queryF16); }

    public Precision withGeluTable(boolean t) { return new Precision(activations, matmulInput, t, kvCache, queryF16); }

    public Precision withKvCache(KvStore s) { return new Precision(activations, matmulInput, geluTable, s, queryF16); }

    public Precision withQueryF16(boolean q) { return new Precision(activations, matmulInput, geluTable, kvCache, q); }

    /** In the words a porter uses: "bf16 activations, GELU through an fp16 table". */
    public String describe() {
        if (exact()) return "exact fp32";
        var parts = new ArrayList<String>();
        if (activations != Format.F32) parts.add(activations.id() + " activations (every intermediate rounded to " + activations.id() + ")");
        if (matmulInput != Format.F32) parts.add("matmul inputs rounded to " + matmulInput.id() + " (as for " + matmulInput.id() + " weights)");
        if (geluTable) parts.add("GELU through an fp16 table");
        if (kvCache != KvStore.F32) parts.add("K/V stored as " + kvCache.id());
        if (queryF16) parts.add("queries rounded to fp16 for K·q");
        return String.join(", ", parts);
    }

    /**
     * The hypotheses worth testing for one op: each single switch, and the combinations real engines ship (ggml's
     * fp16-table GELU with bf16 or f16 weights; a half-precision cache with fp16 queries).
     */
    public static List<Precision> hypotheses(boolean hasGelu, boolean readsCache, boolean attends) {
        var out = new ArrayList<Precision>();
        for (var f : List.of(Format.BF16, Format.F16)) out.add(EXACT.withActivations(f));
        if (hasGelu) out.add(EXACT.withGeluTable(true));
        for (var f : List.of(Format.BF16, Format.F16)) {
            out.add(EXACT.withMatmulInput(f));
            if (hasGelu) out.add(EXACT.withMatmulInput(f).withGeluTable(true));
        }
        if (readsCache || attends)
            for (var s : List.of(KvStore.F16, KvStore.BF16, KvStore.Q8_0, KvStore.Q4_0)) {
                out.add(EXACT.withKvCache(s));
                if (attends && s == KvStore.F16) out.add(EXACT.withKvCache(s).withQueryF16(true));
            }
        return out;
    }
}
