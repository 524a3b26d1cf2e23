package dev.decodiff.engine.quant;

import dev.decodiff.metal.Parallel;
import dev.decodiff.metal.TensorView;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * MLX's affine dequantization into fp32: each row of a packed weight is a little-endian bit stream of {@code bits}-bit
 * codes (element j at bits [j·bits, (j+1)·bits) of the row's bytes, so 3-, 5- and 6-bit codes cross byte and uint32
 * boundaries), and w[r, c] = scale[r, c/g]·q + bias[r, c/g]. The product of a bf16/f16 scale and a code of at most 8
 * bits is exact in fp32; the sum rounds once. That is the quantized model's own weight to fp32 precision (MLX's CPU
 * dequantize rounds it further to the scales' dtype; its GPU kernels accumulate in fp32 without materialising it).
 */
public final class AffineDequantizer {
    private AffineDequantizer() {}

    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /**
     * Writes the [rows, cols] fp32 weights into {@code out} (rows·cols·4 bytes); {@code packed} holds rows·cols·bits/8
     * bytes, {@code scales} and {@code biases} rows·cols/groupSize floats each, all row-major.
     */
    public static void dequantize(MemorySegment packed, TensorView scales, TensorView biases, int bits, int groupSize,
                                  int rows, int cols, MemorySegment out) {
        int rowBytes = (int) ((long) cols * bits / 8);
        int groups = cols / groupSize;
        int mask = (1 << bits) - 1;
        Parallel.forRange(rows, 64, (from, to) -> {
            var row = new byte[rowBytes + 1]; // one spare byte: the last code reads two bytes
            for (int r = from; r < to; r++) {
                MemorySegment.copy(packed, ValueLayout.JAVA_BYTE, (long) r * rowBytes, row, 0, rowBytes);
                long o = (long) r * cols * 4;
                for (int g = 0; g < groups; g++) {
                    float s = scales.getFloat((long) r * groups + g);
                    float b = biases.getFloat((long) r * groups + g);
                    for (int c = g * groupSize, end = c + groupSize; c < end; c++) {
                        int bit = c * bits;
                        int i = bit >>> 3;
                        int two = (row[i] & 0xff) | (row[i + 1] & 0xff) << 8;
                        int q = (two >>> (bit & 7)) & mask;
                        out.set(F32, o + (long) c * 4, s * q + b);
                    }
                }
            }
        });
    }

    /** The code of element (r, c) alone (inspection and tests). */
    public static int code(MemorySegment packed, int bits, int cols, int r, int c) {
        long bit = ((long) r * cols + c) * bits;
        long i = bit >>> 3;
        int two = packed.get(ValueLayout.JAVA_BYTE, i) & 0xff;
        if (i + 1 < packed.byteSize()) two |= (packed.get(ValueLayout.JAVA_BYTE, i + 1) & 0xff) << 8;
        return (two >>> (bit & 7)) & ((1 << bits) - 1);
    }
}
