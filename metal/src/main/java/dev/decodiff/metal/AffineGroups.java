package dev.decodiff.metal;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * The quantization of a {@link WeightMatrix} kept as MLX affine codes: {@code bits}-bit codes (the matrix's data, row r
 * at r·cols·bits/8 bytes, element c at bits [c·bits, (c+1)·bits) little-endian) and, per row and group of
 * {@code groupSize} columns, one (scale, bias) pair in {@code pairType} (F32, BF16 or F16: the checkpoint's own
 * values), pair (r, g) at index r·(cols/groupSize) + g of {@code pairs}, scale first. Element (r, c) is
 * fl(fl(scale·q) + bias) in fp32, the value the dequantizing loader writes.
 */
public record AffineGroups(int bits, int groupSize, DType pairType, MemorySegment pairs) {
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    public AffineGroups {
        if (bits != 4 && bits != 8) throw new IllegalArgumentException("packed affine matrices take 4- or 8-bit codes, not " + bits);
        if (groupSize != 32 && groupSize != 64 && groupSize != 128)
            throw new IllegalArgumentException("affine group size must be 32, 64 or 128, not " + groupSize);
        if (!pairType.isFloat()) throw new IllegalArgumentException("affine scales and biases must be float, are " + pairType);
    }

    /** The pair type as decodiff_kernels.c numbers it. */
    int nativeType() {
        return switch (pairType) {
            case F32 -> 0;
            case BF16 -> 1;
            case F16 -> 2;
            default -> throw new IllegalStateException(pairType.toString());
        };
    }

    /** Bytes of codes of one row of {@code cols} columns. */
    public long rowBytes(int cols) { return (long) cols * bits / 8; }

    /** Bytes of the pairs of one row. */
    public long pairRowBytes(int cols) { return 2L * (cols / groupSize) * pairType.bytes(); }

    /** Value {@code k} (0 scale, 1 bias) of pair {@code i}. */
    float pair(long i, int k) {
        long e = 2 * i + k;
        return switch (pairType) {
            case F32 -> pairs.getAtIndex(F32, e);
            case BF16 -> Float.intBitsToFloat((pairs.getAtIndex(I16, e) & 0xffff) << 16);
            case F16 -> Float.float16ToFloat(pairs.getAtIndex(I16, e));
            default -> throw new IllegalStateException(pairType.toString());
        };
    }

    /** Element (r, c) of a matrix of {@code cols} columns whose codes are {@code codes}: fl(fl(scale·q) + bias). */
    float get(MemorySegment codes, int cols, int r, int c) {
        long b = r * rowBytes(cols);
        int q = bits == 8 ? codes.get(ValueLayout.JAVA_BYTE, b + c) & 0xff
                : (codes.get(ValueLayout.JAVA_BYTE, b + c / 2) & 0xff) >>> (4 * (c & 1)) & 0xf;
        long i = (long) r * (cols / groupSize) + c / groupSize;
        float s = pair(i, 0), o = pair(i, 1);
        return s * q + o;
    }

    /** The pairs of rows [rowStart, rowStart + rows) of a matrix of {@code cols} columns. */
    AffineGroups slice(int cols, int rowStart, int rows) {
        return new AffineGroups(bits, groupSize, pairType, pairs.asSlice(rowStart * pairRowBytes(cols), rows * pairRowBytes(cols)));
    }
}
