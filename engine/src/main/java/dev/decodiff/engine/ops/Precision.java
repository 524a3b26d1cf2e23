package dev.decodiff.engine.ops;

import dev.decodiff.engine.KvType;

import java.util.ArrayList;

/**
 * How an engine other than the exact fp32 one may compute an op: the rounding choices real engines make, each a
 * switch, so a precision hypothesis is one small change of the op, tested exactly like a bug variant.
 *
 * @param activations the format every intermediate is rounded to after each sub-op, as a framework running the whole
 *                    model in that dtype does (transformers or MLX in bf16: after every linear, norm, product, add)
 * @param matmulInput the format a matmul's input vector is converted to before the dot products (ggml does this to
 *                    match bf16 or f16 weights)
 * @param geluTable   GELU looked up in a 65,536-entry fp16 table at the fp16 rounding of x (ggml-cpu's default)
 * @param keys        the format keys are stored in and read back from
 * @param values      the format values are stored in and read back from
 * @param attention   how attention multiplies what it reads
 * @param expertInput the format the MoE experts' matmul inputs are converted to, where it differs from the dense
 *                    matmuls' (ggml's mul_mat_id converts to the weights' vec-dot type even where its dense path keeps
 *                    fp32 inputs for f16 weights)
 * @param pleGateInput the format the per-layer-input gate's matmul input is converted to, where it differs from the
 *                    other matmuls' (its matrix is narrow — P rows — and ggml multiplies it on its vec-dot path,
 *                    which converts the input to the weights' type even where its GEMM path does not)
 * @param q8Input     every matmul's input quantized along its row as ggml does for that matrix's quantized type (its
 *                    vec-dot type, {@link StoredTypes}): q8_0 blocks (32 values, one fp16 scale) for Q4_0, Q5_0, Q8_0
 *                    (and Q4_1, Q5_1's q8_1), q8_K blocks (256 values, one fp32 scale) for the K-quants; float
 *                    matrices untouched. Where the folder does not say the types, every matrix is taken as q8_0's
 */
public record Precision(Format activations, Format matmulInput, boolean geluTable, KvStore keys, KvStore values, Attention attention,
                        Format expertInput, Format pleGateInput, boolean q8Input, boolean scaleFormatDequant, boolean storedMatrices,
                        Format ropeFrequencies, Format weights) {
    public static final Precision EXACT = new Precision(Format.F32, Format.F32, false, KvStore.F32, KvStore.F32, Attention.EXACT, Format.F32,
            Format.F32, false, false, false, Format.F32, Format.F32);

    /**
     * @param scaleFormatDequant affine-quantized (MLX) matrices dequantized as MLX does, scale·q + bias computed in the
     *                           scales' own format (bf16: each weight within 2⁻⁹ of its fp32 dequantization), where the
     *                           exact op dequantizes in fp32
     * @param storedMatrices     ggml's matmuls on a GGUF's own matrices: each matrix as the GGUF stores it (f16, bf16,
     *                           q8_0 … dequantized) and its input converted to that type's vec-dot type (rounded to
     *                           bf16/f16, quantized to q8_0/q8_K blocks; F32 matrices untouched) — the ops that know the
     *                           GGUF's types read them (Qwen3.5's); the others ignore it
     * @param ropeFrequencies    the format RoPE's inverse frequencies are stored in before the fp32 angle
     *                           position·inv_freq is formed: a framework that casts every buffer to the model's dtype
     *                           (transformers' {@code model.to(torch.bfloat16)}) rounds them, and the angle error grows
     *                           with the position
     * @param weights            the format the parameters are held in while the arithmetic stays fp32 (an engine that
     *                           casts an fp32 checkpoint to bf16 or fp16 and computes in fp32); the ops that describe it
     *                           read it (the Llama family's), the others ignore it
     */
    public Precision {}

    public Precision(Format activations, Format matmulInput, boolean geluTable, KvStore keys, KvStore values, Attention attention,
                     Format expertInput, Format pleGateInput, boolean q8Input, boolean scaleFormatDequant, boolean storedMatrices,
                     Format ropeFrequencies) {
        this(activations, matmulInput, geluTable, keys, values, attention, expertInput, pleGateInput, q8Input, scaleFormatDequant, storedMatrices,
                ropeFrequencies, Format.F32);
    }

    public Precision(Format activations, Format matmulInput, boolean geluTable, KvStore keys, KvStore values, Attention attention,
                     Format expertInput, Format pleGateInput, boolean q8Input, boolean scaleFormatDequant, boolean storedMatrices) {
        this(activations, matmulInput, geluTable, keys, values, attention, expertInput, pleGateInput, q8Input, scaleFormatDequant, storedMatrices, Format.F32);
    }

    public Precision(Format activations, Format matmulInput, boolean geluTable, KvStore keys, KvStore values, Attention attention,
                     Format expertInput, Format pleGateInput, boolean q8Input, boolean scaleFormatDequant) {
        this(activations, matmulInput, geluTable, keys, values, attention, expertInput, pleGateInput, q8Input, scaleFormatDequant, false);
    }

    public Precision(Format activations, Format matmulInput, boolean geluTable, KvStore keys, KvStore values, Attention attention,
                     Format expertInput, Format pleGateInput, boolean q8Input) {
        this(activations, matmulInput, geluTable, keys, values, attention, expertInput, pleGateInput, q8Input, false);
    }

    public Precision withScaleFormatDequant(boolean d) {
        return new Precision(activations, matmulInput, geluTable, keys, values, attention, expertInput, pleGateInput, q8Input, d, storedMatrices, ropeFrequencies, weights);
    }

    public Precision withStoredMatrices(boolean m) {
        return new Precision(activations, matmulInput, geluTable, keys, values, attention, expertInput, pleGateInput, q8Input, scaleFormatDequant, m, ropeFrequencies, weights);
    }

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

        /**
         * Rows [n, stride] as they come back from a cache of this type: a rounded copy, or the rows themselves where
         * nothing rounds (F32, or a block type whose blocks do not tile the row: ggml would not store it either).
         */
        public float[] readBack(float[] rows, int stride) {
            if (this == F32) return rows;
            float[] out = rows.clone();
            switch (this) {
                case BF16 -> Format.BF16.round(out);
                case F16 -> Format.F16.round(out);
                default -> {
                    if (stride % KvType.BLOCK != 0 || out.length % stride != 0) return rows;
                    kvType().roundTrip(out, 0, out.length / stride, stride);
                }
            }
            return out;
        }

        /** The format ggml converts the other operand of a matmul with rows of this type to (its vec_dot_type). */
        public KvStore vecDot() {
            return switch (this) {
                case Q4_0, Q8_0 -> Q8_0;
                default -> this;
            };
        }
    }

    /** The attention kernel's own arithmetic. */
    public enum Attention {
        /** softmax(q·kᵀ)·v in fp32. */
        EXACT,
        /**
         * ggml's two matmuls: q converted to the keys' vec-dot type for K·q, the probabilities to the values' for P·V
         * (fp16 for an f16 cache, q8_0 blocks for a q8_0 one).
         */
        GGML,
        /** ggml-cpu's flash attention: q, K, V in fp16, P·V accumulated in an fp16 vector under an online softmax. */
        GGML_FLASH
    }

    public boolean exact() { return equals(EXACT); }

    public Precision withActivations(Format f) { return new Precision(f, matmulInput, geluTable, keys, values, attention, expertInput, pleGateInput, q8Input, scaleFormatDequant, storedMatrices, ropeFrequencies, weights); }

    public Precision withMatmulInput(Format f) { return new Precision(activations, f, geluTable, keys, values, attention, expertInput, pleGateInput, q8Input, scaleFormatDequant, storedMatrices, ropeFrequencies, weights); }

    public Precision withGeluTable(boolean t) { return new Precision(activations, matmulInput, t, keys, values, attention, expertInput, pleGateInput, q8Input, scaleFormatDequant, storedMatrices, ropeFrequencies, weights); }

    public Precision withKeys(KvStore s) { return new Precision(activations, matmulInput, geluTable, s, values, attention, expertInput, pleGateInput, q8Input, scaleFormatDequant, storedMatrices, ropeFrequencies, weights); }

    public Precision withValues(KvStore s) { return new Precision(activations, matmulInput, geluTable, keys, s, attention, expertInput, pleGateInput, q8Input, scaleFormatDequant, storedMatrices, ropeFrequencies, weights); }

    public Precision withAttention(Attention a) { return new Precision(activations, matmulInput, geluTable, keys, values, a, expertInput, pleGateInput, q8Input, scaleFormatDequant, storedMatrices, ropeFrequencies, weights); }

    public Precision withExpertInput(Format f) { return new Precision(activations, matmulInput, geluTable, keys, values, attention, f, pleGateInput, q8Input, scaleFormatDequant, storedMatrices, ropeFrequencies, weights); }

    public Precision withPleGateInput(Format f) { return new Precision(activations, matmulInput, geluTable, keys, values, attention, expertInput, f, q8Input, scaleFormatDequant, storedMatrices, ropeFrequencies, weights); }

    public Precision withQ8Input(boolean q) { return new Precision(activations, matmulInput, geluTable, keys, values, attention, expertInput, pleGateInput, q, scaleFormatDequant, storedMatrices, ropeFrequencies, weights); }

    public Precision withRopeFrequencies(Format f) {
        return new Precision(activations, matmulInput, geluTable, keys, values, attention, expertInput, pleGateInput, q8Input, scaleFormatDequant, storedMatrices, f, weights);
    }

    public Precision withWeights(Format f) {
        return new Precision(activations, matmulInput, geluTable, keys, values, attention, expertInput, pleGateInput, q8Input, scaleFormatDequant, storedMatrices, ropeFrequencies, f);
    }

    /** RoPE's inverse frequencies as this engine holds them (rounded to {@link #ropeFrequencies}). */
    public float[] frequenciesAsHeld(float[] invFreq) {
        return ropeFrequencies == Format.F32 ? invFreq : ropeFrequencies.round(invFreq.clone());
    }

    /** The format the per-layer-input gate's matmul input is converted to. */
    public Format pleGate() { return pleGateInput != Format.F32 ? pleGateInput : matmulInput; }

    /** The format the experts' matmul inputs are converted to. */
    public Format experts() { return expertInput != Format.F32 ? expertInput : matmulInput; }

    /** In the words a porter uses: "bf16 activations, GELU through an fp16 table". */
    public String describe() {
        if (exact()) return "exact fp32";
        var parts = new ArrayList<String>();
        if (activations != Format.F32) parts.add(activations.id() + " activations (every intermediate rounded to " + activations.id() + ")");
        if (weights != Format.F32 && weights != activations && weights != matmulInput)
            parts.add("weights held in " + weights.id() + " (every parameter rounded to " + weights.id() + ", the arithmetic fp32)");
        if (matmulInput != Format.F32) parts.add("matmul inputs rounded to " + matmulInput.id() + " (as for " + matmulInput.id() + " weights)");
        if (expertInput != Format.F32 && expertInput != matmulInput)
            parts.add("the experts' matmul inputs rounded to " + expertInput.id() + " (as for " + expertInput.id() + " expert weights)");
        if (pleGateInput != Format.F32 && pleGateInput != matmulInput)
            parts.add("the per-layer-input gate's matmul input rounded to " + pleGateInput.id() + " (its narrow matrix on ggml's vec-dot path)");
        if (scaleFormatDequant) parts.add("MLX-quantized weights dequantized in their scales' format (scale·q + bias rounded, as MLX computes it)");
        if (storedMatrices) parts.add("ggml's matmuls on the GGUF's matrices as stored (each input converted to its matrix's vec-dot type: bf16/f16 rounded, q8_0/q8_K blocks)");
        if (q8Input) parts.add("matmul inputs quantized to the weights' vec-dot blocks (q8_0 for 32-value types, q8_K for K-quants)");
        if (geluTable) parts.add("GELU through an fp16 table");
        if (ropeFrequencies != Format.F32)
            parts.add("RoPE frequencies stored in " + ropeFrequencies.id() + " (every buffer cast to the model's dtype; the angle error grows with the position)");
        if (keys != KvStore.F32 && keys == values) parts.add("K/V stored as " + keys.id());
        else {
            if (keys != KvStore.F32) parts.add("keys stored as " + keys.id());
            if (values != KvStore.F32) parts.add("values stored as " + values.id());
        }
        switch (attention) {
            case GGML -> parts.add("attention's matmuls in the cache's types (q to " + keys.vecDot().id() + " for K·q, probabilities to "
                    + values.vecDot().id() + " for P·V)");
            case GGML_FLASH -> parts.add(values == KvStore.F32 || values == KvStore.F16
                    ? "flash attention in fp16 (q, K, V rounded; P·V accumulated in fp16)"
                    : "flash attention on the cache's types (q to " + (keys == KvStore.F32 ? KvStore.F16 : keys).vecDot().id() + " for K·q)");
            case EXACT -> {}
        }
        return String.join(", ", parts);
    }
}
