package dev.decodiff.metal;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;

/** A named, typed, shaped view of bytes (usually memory-mapped); no copy is made until {@link #toFloats()}. */
public record TensorView(String name, DType dtype, long[] shape, MemorySegment data) {

    private static final ValueLayout.OfFloat F32_LE = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(java.nio.ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfShort I16_LE = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(java.nio.ByteOrder.LITTLE_ENDIAN);

    public long elementCount() {
        long n = 1;
        for (long d : shape) n *= d;
        return n;
    }

    public int rank() { return shape.length; }

    public long dim(int i) { return shape[i]; }

    public float getFloat(long i) {
        return switch (dtype) {
            case F32 -> data.getAtIndex(F32_LE, i);
            case BF16 -> Float.intBitsToFloat((data.getAtIndex(I16_LE, i) & 0xffff) << 16);
            case F16 -> Float.float16ToFloat(data.getAtIndex(I16_LE, i));
            default -> throw new IllegalStateException("tensor '" + name + "' has non-float dtype " + dtype);
        };
    }

    /** Copies to a float array (bf16/f16 widened exactly). */
    public float[] toFloats() {
        long n = elementCount();
        if (n > Integer.MAX_VALUE - 16) throw new IllegalStateException("tensor '" + name + "' too large for a float[]: " + n);
        var out = new float[(int) n];
        if (dtype == DType.F32) {
            MemorySegment.copy(data, F32_LE, 0, out, 0, out.length);
        } else {
            for (int i = 0; i < out.length; i++) out[i] = getFloat(i);
        }
        return out;
    }

    /**
     * {@link #toFloats}, without the copy where this view is exactly a float[] on the heap (F32, the whole array, as a
     * live engine's captured tensor is): that array itself. For callers that only read it.
     */
    public float[] floatsToRead() {
        if (dtype == DType.F32 && data.heapBase().orElse(null) instanceof float[] a && data.address() == 0
                && data.byteSize() == (long) a.length * Float.BYTES && a.length == elementCount()) return a;
        return toFloats();
    }

    public String shapeString() { return Arrays.toString(shape); }

    @Override
    public String toString() { return name + " " + dtype + " " + shapeString(); }
}
