package dev.decodiff.metal;

/** Element types of stored tensors, with their safetensors names. */
public enum DType {
    F32("F32", 4), BF16("BF16", 2), F16("F16", 2), I64("I64", 8), I32("I32", 4),
    /** MLX's packed quantized weights (codes of 2–8 bits, little-endian bit order). */
    U32("U32", 4);

    private final String safetensorsName;
    private final int bytes;

    DType(String safetensorsName, int bytes) {
        this.safetensorsName = safetensorsName;
        this.bytes = bytes;
    }

    public String safetensorsName() { return safetensorsName; }

    public int bytes() { return bytes; }

    public boolean isFloat() { return this == F32 || this == BF16 || this == F16; }

    public static DType fromSafetensors(String name) {
        for (var t : values()) if (t.safetensorsName.equals(name)) return t;
        throw new IllegalArgumentException("unsupported dtype '" + name + "' (supported: F32, BF16, F16, I64, I32, U32)");
    }
}
