package dev.decodiff.engine;

/**
 * How cached keys or values are stored. f32 is exact (the default); bf16 rounds each element; q8_0 and q4_0 are
 * llama.cpp's block formats (32 elements share one fp16 scale). Rows must be a multiple of 32 for the q types.
 */
public enum KvType {
    F32("f32"), BF16("bf16"), Q8_0("q8_0"), Q4_0("q4_0");

    public static final int BLOCK = 32;
    private final String id;

    KvType(String id) { this.id = id; }

    public String id() { return id; }

    /** Bytes one row of {@code stride} elements takes in this format. */
    public long bytesPerRow(int stride) {
        return switch (this) {
            case F32 -> 4L * stride;
            case BF16 -> 2L * stride;
            case Q8_0 -> (stride / BLOCK) * (2L + BLOCK);
            case Q4_0 -> (stride / BLOCK) * (2L + BLOCK / 2);
        };
    }

    /** Rows of {@code stride} elements of x from off, replaced in place by what a cache of this type reads back. */
    public void roundTrip(float[] x, int off, int rows, int stride) {
        if (this == F32) return;
        var r = KvRows.create(this, stride, 1);
        for (int i = 0; i < rows; i++) {
            r.write(0, x, off + i * stride);
            r.read(0, x, off + i * stride);
        }
    }

    public static KvType byId(String id) {
        for (var t : values()) if (t.id.equalsIgnoreCase(id)) return t;
        throw new IllegalArgumentException("unknown KV cache type '" + id + "' (f32, bf16, q8_0, q4_0)");
    }

    @Override
    public String toString() { return id; }
}
