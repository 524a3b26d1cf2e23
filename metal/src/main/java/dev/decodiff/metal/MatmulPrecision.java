package dev.decodiff.metal;

/**
 * How a bf16 weight matrix multiplies activations. {@link #FP32} (the default) is exact fp32 arithmetic, matching
 * transformers in float32 to ~1e-6: a prefill's GEMMs run on AMX tiles where the CPU has them (each activation split
 * exactly into three bf16 terms, docs/matmul-bf16.md), elsewhere and in decode on fused multiply-adds.
 * {@link #FP32_FMA} is the same arithmetic on fused multiply-adds only, where a prefill gives each token the bits of
 * decoding it alone. {@link #BF16} (opt-in, faster prefill) rounds the activations to bf16 and
 * multiplies with bf16 dot products (AVX512-BF16 where the CPU has it), as llama.cpp does with bf16 weights; its drift
 * from the fp32 reference is measured per capture point in docs/matmul-bf16.md. Weights stored as f32 or f16 always
 * take the fp32 path.
 */
public enum MatmulPrecision {
    FP32("fp32"), FP32_FMA("fp32-fma"), BF16("bf16");

    private final String id;

    MatmulPrecision(String id) { this.id = id; }

    public String id() { return id; }

    public static MatmulPrecision byId(String id) {
        for (var p : values()) if (p.id.equalsIgnoreCase(id)) return p;
        throw new IllegalArgumentException("unknown matmul precision '" + id + "' (fp32, fp32-fma, bf16)");
    }

    @Override
    public String toString() { return id; }
}
