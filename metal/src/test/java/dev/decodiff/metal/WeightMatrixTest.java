package dev.decodiff.metal;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The blocked kernels must give, for every (token, row), exactly the bits of the plain one-row dot product (one
 * fp32 accumulator per row in column order): prefill equals decode, and any thread split gives the same result.
 * The reference here is an independent scalar loop in that same order.
 */
class WeightMatrixTest {
    private static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    static WeightMatrix random(DType dtype, int rows, int cols, long seed) {
        var rnd = new Random(seed);
        MemorySegment seg = Arena.ofAuto().allocate((long) rows * cols * dtype.bytes(), 64);
        for (long i = 0; i < (long) rows * cols; i++) {
            float v = (float) rnd.nextGaussian();
            if (dtype == DType.BF16) seg.setAtIndex(I16, i, (short) (Float.floatToRawIntBits(v) >>> 16));
            else seg.setAtIndex(F32, i, v);
        }
        return new WeightMatrix("w", dtype, rows, cols, seg);
    }

    /** The reference: 16 lane accumulators over the vector part in column order, summed in lane order, then the tail. */
    static float reference(WeightMatrix w, int r, float[] x, int xOff) {
        int L = 16, cols = w.cols(), bound = cols - cols % L;
        float[] acc = new float[L];
        for (int c = 0; c < bound; c += L)
            for (int k = 0; k < L; k++) acc[k] = Math.fma(w.get(r, c + k), x[xOff + c + k], acc[k]);
        float s = 0f;
        for (int k = 0; k < L; k++) s += acc[k];
        for (int c = bound; c < cols; c++) s += w.get(r, c) * x[xOff + c];
        return s;
    }

    @ParameterizedTest
    @CsvSource({"BF16,37,64,1", "BF16,130,1536,7", "BF16,19,70,5", "F32,37,64,3", "F32,67,200,9", "BF16,1024,256,13", "F32,8,16,4",
            // several column blocks of matmul, the last one short, a scalar tail, two token chunks
            "BF16,21,1100,13", "F32,12,1543,8", "BF16,13,1100,240"})
    void matvecAndMatmulAreBitIdenticalToTheOneRowDot(DType dtype, int rows, int cols, int tokens) {
        var w = random(dtype, rows, cols, rows * 31L + cols);
        var rnd = new Random(tokens);
        float[] x = new float[tokens * cols];
        for (int i = 0; i < x.length; i++) x[i] = (float) rnd.nextGaussian();

        float[] y = new float[tokens * rows];
        w.matmul(x, tokens, y);
        for (int t = 0; t < tokens; t++) {
            float[] yv = new float[rows + 3];
            w.matvec(x, t * cols, yv, 3);
            for (int r = 0; r < rows; r++) {
                float ref = reference(w, r, x, t * cols);
                assertThat(Float.floatToRawIntBits(y[t * rows + r])).as("matmul t=%d r=%d", t, r).isEqualTo(Float.floatToRawIntBits(ref));
                assertThat(Float.floatToRawIntBits(yv[3 + r])).as("matvec t=%d r=%d", t, r).isEqualTo(Float.floatToRawIntBits(ref));
                assertThat(Float.floatToRawIntBits(w.dot(r, x, t * cols))).isEqualTo(Float.floatToRawIntBits(ref));
            }
        }
    }

    @ParameterizedTest
    @CsvSource({"1000,7", "5,1", "64,64", "100000,16"})
    void parallelRunsEveryIndexOnce(int n, int grain) {
        int[] hits = new int[n];
        for (int rep = 0; rep < 50; rep++) Parallel.forRange(n, grain, (from, to) -> {
            for (int i = from; i < to; i++) hits[i]++;
        });
        for (int i = 0; i < n; i++) assertThat(hits[i]).isEqualTo(50);
    }
}
