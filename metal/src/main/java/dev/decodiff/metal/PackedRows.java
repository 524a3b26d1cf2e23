package dev.decodiff.metal;

import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorShape;
import jdk.incubator.vector.VectorSpecies;

/**
 * Cache rows kept packed — bf16, or llama.cpp's q8_0 / q4_0 blocks of 32 elements sharing one fp16 scale — that the
 * attention kernels of {@link VectorMath} read where they lie, widening sixteen elements (eight without 512-bit
 * vectors) at a time in registers: a decode step no longer decodes the history it attends over into a fresh f32 copy
 * (at a long context that copy cost more than the dot products, and a q4_0 history decoded element by element).
 *
 * <p>Every widened element is exactly what the format's decode gives — bf16: the 16 bits as the high half of an fp32
 * (exact); q8_0: q·d; q4_0: (n − 8)·d (the integer converts exactly, one rounding in the multiply) — so a kernel over
 * packed rows gives the bits of the same kernel over decoded f32 rows.
 *
 * <p>Layouts (rows of {@code stride} elements, stride a multiple of 32 for the q formats): bf16 in {@code halves}, element
 * e at halves[e]; q8_0 element e at bytes[e], the scale of its block at halves[e / 32]; q4_0 the block of element e at
 * bytes[e / 32 · 16 ..], element k < 16 of a block in the low nibble of byte k, element 16 + k in its high nibble.
 */
public record PackedRows(Format format, byte[] bytes, short[] halves, int stride) {
    public enum Format { BF16, Q8_0, Q4_0 }

    /** Elements a q block holds; a q-format row starts on a block and a packed read covers 16 elements of one block. */
    public static final int BLOCK = 32;

    /** A span starts on a multiple of 16 elements (half a q block), so every packed read lies within one half-block. */
    private static final int L = 16;
    /** {@link #load}'s width, VectorMath's (16 lanes, or 8 where the CPU has no 512-bit vectors), and the narrower species it widens from. */
    private static final VectorSpecies<Float> F = VectorMath.E;
    private static final VectorSpecies<Integer> I = VectorSpecies.of(int.class, F.vectorShape());
    private static final VectorSpecies<Short> S = VectorSpecies.of(short.class, VectorShape.forBitSize(F.length() * 16));
    private static final VectorSpecies<Byte> B = VectorSpecies.of(byte.class, VectorShape.forBitSize(F.length() * 8));

    public PackedRows {
        if (format != Format.BF16 && stride % BLOCK != 0)
            throw new IllegalArgumentException(format + " rows must be a multiple of " + BLOCK + " elements, are " + stride);
    }

    /**
     * Rows [0, count) of an attention kernel's rows, read from rows slots[i] of {@code rows} starting at column
     * {@code column} (a head's slice; for the q formats a multiple of 16).
     */
    public record Span(PackedRows rows, int[] slots, int count, int column) {
        public Span {
            if (rows.format != Format.BF16 && column % L != 0)
                throw new IllegalArgumentException("a " + rows.format + " span starts on a multiple of " + L + ", not " + column);
        }

        int element(int i) { return slots[i] * rows.stride + column; }
    }

    /** Element e widened to fp32, as the format's decode gives it. */
    float get(int e) {
        return switch (format) {
            case BF16 -> Float.intBitsToFloat((halves[e] & 0xffff) << 16);
            case Q8_0 -> bytes[e] * Float.float16ToFloat(halves[e / BLOCK]);
            case Q4_0 -> {
                int v = bytes[e / BLOCK * (BLOCK / 2) + e % (BLOCK / 2)] & 0xff;
                yield ((e % BLOCK < BLOCK / 2 ? v & 0x0f : v >>> 4) - 8) * Float.float16ToFloat(halves[e / BLOCK]);
            }
        };
    }

    /**
     * Elements [e, e + n) widened to fp32 into dst at off, as {@link #get} gives each: a cache row read back (e the
     * row's first element; for the q formats a whole number of blocks).
     */
    public void widen(int e, int n, float[] dst, int off) {
        int i = 0;
        for (int bound = n - n % F.length(); i < bound; i += F.length()) load(e + i).intoArray(dst, off + i);
        for (; i < n; i++) dst[off + i] = get(e + i);
    }

    /** Elements [e, e + F's length) widened to fp32 (e a multiple of that length), as {@link #get} gives each. */
    FloatVector load(int e) {
        return switch (format) {
            case BF16 -> ((IntVector) ShortVector.fromArray(S, halves, e).convertShape(VectorOperators.S2I, I, 0))
                    .lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats();
            case Q8_0 -> ((FloatVector) ByteVector.fromArray(B, bytes, e).convertShape(VectorOperators.B2F, F, 0)).mul(Float.float16ToFloat(halves[e / BLOCK]));
            case Q4_0 -> {
                // element k of a block's first half in the low nibble of byte k, of its second half in the high one
                var packed = ByteVector.fromArray(B, bytes, e / BLOCK * (BLOCK / 2) + e % (BLOCK / 2));
                var nibbles = e % BLOCK < BLOCK / 2 ? packed.and((byte) 0x0f) : packed.lanewise(VectorOperators.LSHR, 4).and((byte) 0x0f);
                yield ((FloatVector) nibbles.sub((byte) 8).convertShape(VectorOperators.B2F, F, 0)).mul(Float.float16ToFloat(halves[e / BLOCK]));
            }
        };
    }
}
