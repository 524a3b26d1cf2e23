package dev.decodiff.harness.dump;

import dev.decodiff.metal.DType;
import dev.decodiff.metal.TensorView;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;

/** A tensor captured from a live engine at a capture point: row-major float32 on the heap. */
public record CapturedTensor(String point, long[] shape, float[] data) {
    public CapturedTensor {
        long n = 1;
        for (long d : shape) n *= d;
        if (n != data.length)
            throw new IllegalArgumentException("point '" + point + "': shape " + Arrays.toString(shape) + " needs " + n + " values, got " + data.length);
    }

    public static CapturedTensor of(String point, int[] shape, float[] data) {
        return new CapturedTensor(point, Arrays.stream(shape).asLongStream().toArray(), data);
    }

    /** A view over the heap data, so live tensors go through the same comparison kernels as mapped ones. */
    public TensorView view() { return new TensorView(point, DType.F32, shape, MemorySegment.ofArray(data)); }
}
