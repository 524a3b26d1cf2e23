package dev.decodiff.llamacpp.gguf;

/**
 * ggml tensor element types as GGUF stores them (the id is ggml.h's enum value), with the block geometry
 * a reader needs to size tensor data: {@code blockSize} elements take {@code blockBytes} bytes.
 * Only F32, F16 and BF16 are written by decodiff; the quantized ones are known so that a reader can check
 * the size of any GGUF llama.cpp writes.
 */
public enum GgmlType {
    F32(0, 1, 4), F16(1, 1, 2), Q4_0(2, 32, 18), Q4_1(3, 32, 20), Q5_0(6, 32, 22), Q5_1(7, 32, 24),
    Q8_0(8, 32, 34), Q8_1(9, 32, 36), Q2_K(10, 256, 84), Q3_K(11, 256, 110), Q4_K(12, 256, 144),
    Q5_K(13, 256, 176), Q6_K(14, 256, 210), Q8_K(15, 256, 292), I8(24, 1, 1), I16(25, 1, 2), I32(26, 1, 4),
    I64(27, 1, 8), F64(28, 1, 8), BF16(30, 1, 2);

    private final int id;
    private final int blockSize;
    private final int blockBytes;

    GgmlType(int id, int blockSize, int blockBytes) {
        this.id = id;
        this.blockSize = blockSize;
        this.blockBytes = blockBytes;
    }

    public int id() { return id; }

    public int blockSize() { return blockSize; }

    /** Bytes of a row of {@code n} elements; n must be a whole number of blocks. */
    public long rowBytes(long n) {
        if (n % blockSize != 0) throw new IllegalArgumentException(this + " rows need a multiple of " + blockSize + " elements, got " + n);
        return Math.multiplyExact(n / blockSize, (long) blockBytes);
    }

    /** The type of this id, or null when this reader does not know it. */
    public static GgmlType ofId(long id) {
        for (var t : values()) if (t.id == id) return t;
        return null;
    }
}
