package dev.decodiff.metal;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * The quantization of a {@link WeightMatrix} kept as MLX affine codes: {@code bits}-bit codes (the matrix's data) and,
 * per row and group of {@code groupSize} columns, one (scale, bias) pair in {@code pairType} (F32, BF16 or F16: the
 * checkpoint's own values) in {@code pairs}, scale first, MLX's order (pair (r, g) at index r·(cols/groupSize) + g) until
 * {@link #block} regroups them. Element (r, c) is scale·q + bias.
 *
 * <p>The codes are <em>blocked</em>: MLX stores row r at r·cols·bits/8 bytes, element c at bits [c·bits, (c+1)·bits)
 * little-endian; {@link #block} regroups each 16 rows into 64-byte chunks of 16 rows × 8 (4-bit) or 4 (8-bit) columns
 * (bytes 4i..4i+3 of a chunk are row i's; 4-bit: byte j holds column j in its low nibble and 4 + j in its high one),
 * the shape the integer decode kernel reads; the pairs alike (a block's 16 pairs of one group follow each other, row
 * 16b + i, group g at index 16b·groups + 16g + i). The rows after the last whole block stay as MLX orders them. A stack of
 * {@code segmentRows}-row matrices (MoE experts) is blocked segment by segment, so that each expert's slice is itself
 * a blocked matrix; {@code segmentRows} 0 means one segment, the whole matrix. A table only looked up a row at a time
 * (E2B's per-layer embeddings) stays {@code asStored}: codes and pairs in MLX's order, read by the Java kernels only.
 */
public record AffineGroups(int bits, int groupSize, DType pairType, MemorySegment pairs, int segmentRows, boolean asStored) {
    /** Rows of one block of the blocked layout. */
    public static final int BLOCK = 16;
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    public AffineGroups {
        if (bits != 4 && bits != 8) throw new IllegalArgumentException("packed affine matrices take 4- or 8-bit codes, not " + bits);
        if (groupSize != 32 && groupSize != 64 && groupSize != 128)
            throw new IllegalArgumentException("affine group size must be 32, 64 or 128, not " + groupSize);
        if (!pairType.isFloat()) throw new IllegalArgumentException("affine scales and biases must be float, are " + pairType);
        if (segmentRows < 0) throw new IllegalArgumentException("segment rows must not be negative: " + segmentRows);
    }

    /** Blocked, in segments of {@code segmentRows} rows (0: one). */
    public AffineGroups(int bits, int groupSize, DType pairType, MemorySegment pairs, int segmentRows) {
        this(bits, groupSize, pairType, pairs, segmentRows, false);
    }

    /** One segment: a plain matrix. */
    public AffineGroups(int bits, int groupSize, DType pairType, MemorySegment pairs) {
        this(bits, groupSize, pairType, pairs, 0);
    }

    /** The same quantization read as MLX stores it (row-major codes, pairs in row order), for a table looked up by rows. */
    public AffineGroups stored() { return new AffineGroups(bits, groupSize, pairType, pairs, 0, true); }

    /** Rows of each independently blocked segment of a {@code rows}-row matrix. */
    int segment(int rows) { return segmentRows == 0 ? rows : segmentRows; }

    /** Whether the native kernels can read a {@code rows}-row matrix as one blocked matrix (its segments are whole blocks). */
    boolean oneLayout(int rows) { return !asStored && (segment(rows) == rows || segment(rows) % BLOCK == 0); }

    /** Index in {@link #pairs} of the pair of row r, group g of a [rows, cols] matrix (blocked). */
    long pairIndex(int rows, int cols, int r, int g) {
        int seg = segment(rows), rr = r % seg, full = asStored ? 0 : seg / BLOCK * BLOCK, groups = cols / groupSize;
        long base = (long) (r - rr) * groups;
        if (rr >= full) return base + (long) rr * groups + g;
        return base + (long) (rr - rr % BLOCK) * groups + (long) g * BLOCK + rr % BLOCK;
    }

    /** Byte of the blocked codes that holds element (r, c) of a [rows, cols] matrix; for 4 bits, {@link #nibble} says which half. */
    long codeByte(int rows, int cols, int r, int c) {
        int seg = segment(rows), rr = r % seg, full = asStored ? 0 : seg / BLOCK * BLOCK;
        long rb = rowBytes(cols), base = (long) (r - rr) * rb;
        if (rr >= full) return base + rr * rb + (long) c * bits / 8;
        long block = base + (long) (rr - rr % BLOCK) * rb + 4 * (rr % BLOCK);
        return bits == 8 ? block + (c / 4) * 64L + c % 4 : block + (c / 8) * 64L + c % 4;
    }

    /** 4-bit: the shift (0 or 4) of element (r, c)'s nibble in {@link #codeByte}. */
    int nibble(int rows, int r, int c) {
        int seg = segment(rows), rr = r % seg;
        return asStored || rr >= seg / BLOCK * BLOCK ? 4 * (c & 1) : (c % 8 >= 4 ? 4 : 0);
    }

    /** The code of element (r, c) of a [rows, cols] matrix whose blocked codes are {@code codes}. */
    int code(MemorySegment codes, int rows, int cols, int r, int c) {
        int b = codes.get(ValueLayout.JAVA_BYTE, codeByte(rows, cols, r, c)) & 0xff;
        return bits == 8 ? b : b >>> nibble(rows, r, c) & 0xf;
    }

    /**
     * MLX's row-major codes of a [rows, cols] matrix ({@code stored}) blocked into {@code out} (as many bytes), and
     * {@link #pairs} (MLX's order as given) blocked in place: on the native kernels where they run, else element by element.
     */
    public void block(MemorySegment stored, int rows, int cols, MemorySegment out) {
        block(stored, rows, cols, out, NativeKernels.affineAvailable());
    }

    /** {@link #block}, on the native kernels or in Java (which a test holds to the native bytes). */
    void block(MemorySegment stored, int rows, int cols, MemorySegment out, boolean natively) {
        if (asStored) throw new IllegalStateException("a table kept as stored is not blocked");
        long bytes = rows * rowBytes(cols);
        if (stored.byteSize() < bytes || out.byteSize() < bytes)
            throw new IllegalArgumentException(bytes + " bytes of codes for [" + rows + ", " + cols + "], segments of " + stored.byteSize() + " and " + out.byteSize());
        int seg = segment(rows);
        if (rows % seg != 0) throw new IllegalArgumentException(rows + " rows are no whole number of " + seg + "-row segments");
        long segBytes = seg * rowBytes(cols), segPairs = seg * pairRowBytes(cols);
        int groups = cols / groupSize, pairBytes = 2 * pairType.bytes();
        var one = new AffineGroups(bits, groupSize, pairType, pairs, 0);
        for (long s = 0; s < rows / seg; s++) {
            var ps = pairs.asSlice(s * segPairs, segPairs);
            var src = stored.asSlice(s * segBytes, segBytes);
            var dst = out.asSlice(s * segBytes, segBytes);
            if (natively) {
                NativeKernels.affineBlockPairs(ps, seg, groups, pairBytes);
                NativeKernels.affineBlock(src, dst, seg, cols, bits);
                continue;
            }
            byte[] mlx = ps.toArray(ValueLayout.JAVA_BYTE);
            for (int r = 0; r < seg; r++)
                for (int g = 0; g < groups; g++)
                    MemorySegment.copy(mlx, (r * groups + g) * pairBytes, ps, ValueLayout.JAVA_BYTE, one.pairIndex(seg, cols, r, g) * pairBytes, pairBytes);
            for (int r = 0; r < seg; r++)
                for (int c = 0; c < cols; c++) {
                    int q = src.get(ValueLayout.JAVA_BYTE, r * rowBytes(cols) + (long) c * bits / 8) & 0xff;
                    if (bits == 4) q = q >>> 4 * (c & 1) & 0xf;
                    long at = one.codeByte(seg, cols, r, c);
                    int sh = bits == 4 ? one.nibble(seg, r, c) : 0;
                    byte old = dst.get(ValueLayout.JAVA_BYTE, at);
                    dst.set(ValueLayout.JAVA_BYTE, at, (byte) (bits == 8 ? q : (old & ~(0xf << sh)) | q << sh));
                }
        }
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

    /** Element (r, c) of a [rows, cols] matrix whose blocked codes are {@code codes}: fl(fl(scale·q) + bias). */
    float get(MemorySegment codes, int rows, int cols, int r, int c) {
        int q = code(codes, rows, cols, r, c);
        long i = pairIndex(rows, cols, r, c / groupSize);
        float s = pair(i, 0), o = pair(i, 1);
        return s * q + o;
    }

    /**
     * Element (r, c) dequantized as MLX computes it: {@code scale·q + bias} in the pairs' own format (each product and
     * sum rounded to bf16 or fp16), where {@link #get} keeps fp32. Half-precision pairs make it differ by up to the
     * format's rounding of each weight (0.4% for bf16).
     */
    float getInPairFormat(MemorySegment codes, int rows, int cols, int r, int c) {
        int q = code(codes, rows, cols, r, c);
        long i = pairIndex(rows, cols, r, c / groupSize);
        float s = pair(i, 0), o = pair(i, 1);
        return switch (pairType) {
            case BF16 -> bf16(bf16(s * q) + o);
            case F16 -> Float.float16ToFloat(Float.floatToFloat16(Float.float16ToFloat(Float.floatToFloat16(s * q)) + o));
            default -> s * q + o;
        };
    }

    /** Round to nearest, ties to even, to bf16 (NaN kept). */
    private static float bf16(float x) {
        if (Float.isNaN(x)) return x;
        int b = Float.floatToRawIntBits(x);
        b += 0x7FFF + ((b >>> 16) & 1);
        return Float.intBitsToFloat(b & 0xFFFF0000);
    }

    /** The pairs of rows [rowStart, rowStart + rows) of a matrix of {@code cols} columns (whole segments of it). */
    AffineGroups slice(int cols, int rowStart, int rows) {
        return new AffineGroups(bits, groupSize, pairType, pairs.asSlice(rowStart * pairRowBytes(cols), rows * pairRowBytes(cols)),
                segmentRows == rows ? 0 : segmentRows, asStored);
    }
}
