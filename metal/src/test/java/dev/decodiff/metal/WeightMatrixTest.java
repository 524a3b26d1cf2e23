package dev.decodiff.metal;

import org.junit.jupiter.api.Test;
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
            "BF16,21,1100,13", "F32,12,1543,8", "BF16,13,1100,240", "BF16,9,4500,13",
            // row groups taking each column block in turn (more rows than one such block, the last block partial),
            // a 6-token tile plus two tokens, a tail; fewer tokens than a tile; rows fewer than one group
            "BF16,37,2100,8", "BF16,70,4200,14", "BF16,18,2060,5", "BF16,3,40,7",
            // rows too wide for a chunk's activations to fit L2: the native GEMM still takes 42 tokens per chunk
            "BF16,9,6404,50"})
    void matvecAndMatmulAreBitIdenticalToTheOneRowDot(DType dtype, int rows, int cols, int tokens) {
        var w = random(dtype, rows, cols, rows * 31L + cols);
        var rnd = new Random(tokens);
        float[] x = new float[tokens * cols];
        for (int i = 0; i < x.length; i++) x[i] = (float) rnd.nextGaussian();

        boolean nativeToo = dtype == DType.BF16 && NativeKernels.available();
        float[] y = new float[tokens * rows], yj = new float[tokens * rows], yn = new float[tokens * rows];
        w.matmul(x, tokens, y);
        w.matmulJava(x, tokens, yj);
        if (nativeToo) w.matmulNative(x, tokens, yn);
        for (int t = 0; t < tokens; t++) {
            float[] yv = new float[rows + 3], yvj = new float[rows + 3], yvn = new float[rows + 3];
            w.matvec(x, t * cols, yv, 3);
            w.matvecJava(x, t * cols, yvj, 3);
            if (nativeToo) w.matvecNative(x, t * cols, yvn, 3);
            for (int r = 0; r < rows; r++) {
                int ref = Float.floatToRawIntBits(reference(w, r, x, t * cols));
                assertThat(Float.floatToRawIntBits(y[t * rows + r])).as("matmul t=%d r=%d", t, r).isEqualTo(ref);
                assertThat(Float.floatToRawIntBits(yj[t * rows + r])).as("java matmul t=%d r=%d", t, r).isEqualTo(ref);
                assertThat(Float.floatToRawIntBits(yv[3 + r])).as("matvec t=%d r=%d", t, r).isEqualTo(ref);
                assertThat(Float.floatToRawIntBits(yvj[3 + r])).as("java matvec t=%d r=%d", t, r).isEqualTo(ref);
                assertThat(Float.floatToRawIntBits(w.dot(r, x, t * cols))).isEqualTo(ref);
                if (nativeToo) {
                    assertThat(Float.floatToRawIntBits(yn[t * rows + r])).as("native matmul t=%d r=%d", t, r).isEqualTo(ref);
                    assertThat(Float.floatToRawIntBits(yvn[3 + r])).as("native matvec t=%d r=%d", t, r).isEqualTo(ref);
                }
            }
            assertThat(yv[0]).as("matvec writes only y[yOff ..]").isZero();
            assertThat(yvn[0]).isZero();
        }
    }

    /**
     * The GEMM too keeps subnormal products, signed zeros, infinities and NaN (no flush-to-zero, no reordering): every
     * token of the register tiles, the tokens left over after them and the scalar tail against the reference.
     */
    @Test
    void specialValuesGiveTheSameBitsInTheGemm() {
        int rows = 9, cols = 50, tokens = 13;
        var w = random(DType.BF16, rows, cols, 11);
        short[] specials = {0x0001, (short) 0x8001, 0x007f, 0x0000, (short) 0x8000, 0x7f80, (short) 0xff80, 0x7fc0};
        for (int r = 0; r < specials.length; r++) w.data().setAtIndex(I16, (long) r * cols + r, specials[r]);
        w.data().setAtIndex(I16, 8L * cols + cols - 1, (short) 0x0003); // a subnormal weight in the scalar tail
        float[] x = new float[tokens * cols];
        var rnd = new Random(3);
        for (int t = 0; t < tokens; t++)
            for (int c = 0; c < cols; c++) {
                // subnormal and signed-zero activations only where the weights are ordinary (inf · 0 would be NaN)
                boolean plain = c < specials.length || c % 3 != 0;
                x[t * cols + c] = plain ? (float) rnd.nextGaussian() : c % 2 == 0 ? -0.0f : Float.MIN_VALUE * (t + c);
            }
        float[] y = new float[tokens * rows], yj = new float[tokens * rows], yn = new float[tokens * rows];
        w.matmul(x, tokens, y);
        w.matmulJava(x, tokens, yj);
        if (NativeKernels.available()) w.matmulNative(x, tokens, yn);
        for (int t = 0; t < tokens; t++)
            for (int r = 0; r < rows; r++) {
                int ref = Float.floatToRawIntBits(reference(w, r, x, t * cols));
                assertThat(Float.floatToRawIntBits(y[t * rows + r])).as("matmul t=%d r=%d", t, r).isEqualTo(ref);
                assertThat(Float.floatToRawIntBits(yj[t * rows + r])).as("java matmul t=%d r=%d", t, r).isEqualTo(ref);
                if (NativeKernels.available())
                    assertThat(Float.floatToRawIntBits(yn[t * rows + r])).as("native matmul t=%d r=%d", t, r).isEqualTo(ref);
            }
        assertThat(Float.isNaN(y[7]) && Float.isInfinite(y[5]) && Float.isInfinite(y[6])).as("the specials reached the sums").isTrue();
    }

    /**
     * --matmul bf16: each output is the dot product of the weight row with the activations rounded to bf16 (nearest
     * even), summed in fp32 in some fixed order: within a few fp32 roundings of the exact sum (computed here in double
     * from independently rounded activations), and clearly not the fp32 path's result (the rounding happened). Decode
     * (one token, also from an offset) and prefill give each token the same bits.
     */
    @ParameterizedTest
    @CsvSource({"37,64,1", "130,1536,7", "19,70,5", "21,1100,13", "13,1100,240", "9,33,6", "64,512,12"})
    void bf16MatmulIsTheDotOfTheRoundedActivations(int rows, int cols, int tokens) {
        var w = random(DType.BF16, rows, cols, rows * 17L + cols);
        var rnd = new Random(tokens * 7L + cols);
        float[] x = new float[tokens * cols];
        for (int i = 0; i < x.length; i++) x[i] = (float) rnd.nextGaussian();
        float[] y = new float[tokens * rows], exact = new float[tokens * rows];
        w.matmul(x, tokens, y, MatmulPrecision.BF16);
        w.matmul(x, tokens, exact);
        int differs = 0;
        for (int t = 0; t < tokens; t++) {
            float[] one = new float[rows + 3];
            w.matvec(x, t * cols, one, 3, MatmulPrecision.BF16);
            for (int r = 0; r < rows; r++) {
                double sum = 0, magnitude = 0;
                for (int c = 0; c < cols; c++) {
                    int bits = Float.floatToRawIntBits(x[t * cols + c]);
                    float xb = Float.intBitsToFloat(((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) << 16); // RNE to bf16
                    double p = (double) w.get(r, c) * xb;
                    sum += p;
                    magnitude += Math.abs(p);
                }
                float got = y[t * rows + r];
                assertThat((double) Math.abs(got - sum)).as("t=%d r=%d", t, r).isLessThanOrEqualTo(cols * 0x1p-24 * magnitude);
                assertThat(Float.floatToRawIntBits(one[3 + r])).as("decode t=%d r=%d", t, r).isEqualTo(Float.floatToRawIntBits(got));
                if (got != exact[t * rows + r]) differs++;
            }
        }
        assertThat(differs).as("activations were rounded to bf16").isGreaterThan(tokens * rows / 2);
    }

    /** Where the build has a native library and the CPU has AVX-512, the native kernels must be the ones that run. */
    @Test
    void nativeKernelsLoadWhereExpected() {
        if (NativeKernels.expectedHere() && NativeKernels.class.getResource(NativeKernels.RESOURCE) != null)
            assertThat(NativeKernels.available()).as(NativeKernels.status()).isTrue();
        if (NativeKernels.expectedHere() && new java.io.File("/usr/bin/gcc").exists())
            assertThat(NativeKernels.class.getResource(NativeKernels.RESOURCE)).as("gcc is here, so the build must have compiled the kernels").isNotNull();
        if (NativeKernels.available() && cpuFlag("avx512_bf16"))
            assertThat(NativeKernels.bf16DotAvailable()).as("this CPU has AVX512-BF16: --matmul bf16 must use it").isTrue();
    }

    private static boolean cpuFlag(String flag) {
        try {
            return java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc/cpuinfo")).stream()
                    .anyMatch(l -> l.startsWith("flags") && (l + " ").contains(" " + flag + " "));
        } catch (java.io.IOException e) {
            return false;
        }
    }

    /** Subnormal weights and activations, signed zeros, infinities and NaN go through both paths alike (no flush-to-zero). */
    @Test
    void specialValuesGiveTheSameBitsOnEveryPath() {
        int rows = 8, cols = 48;
        var w = random(DType.BF16, rows, cols, 5);
        short[] specials = {0x0001, (short) 0x8001, 0x007f, 0x0000, (short) 0x8000, 0x7f80, (short) 0xff80, 0x7fc0};
        for (int r = 0; r < rows; r++) w.data().setAtIndex(I16, (long) r * cols + r, specials[r]);
        float[] x = new float[cols];
        var rnd = new Random(2);
        for (int i = 0; i < cols; i++) x[i] = i % 5 == 0 ? Float.MIN_VALUE * (i + 1) : (float) rnd.nextGaussian();
        float[] yj = new float[rows], yn = new float[rows];
        w.matvecJava(x, 0, yj, 0);
        for (int r = 0; r < rows; r++) assertThat(Float.floatToRawIntBits(yj[r])).isEqualTo(Float.floatToRawIntBits(reference(w, r, x, 0)));
        if (!NativeKernels.available()) return;
        w.matvecNative(x, 0, yn, 0);
        for (int r = 0; r < rows; r++) assertThat(Float.floatToRawIntBits(yn[r])).as("row %d", r).isEqualTo(Float.floatToRawIntBits(yj[r]));
        // A subnormal product must survive: 2^-126 · 2^-10 is subnormal, not zero.
        var tiny = random(DType.BF16, 4, 16, 1);
        for (int c = 0; c < 16; c++) tiny.data().setAtIndex(I16, c, c == 0 ? (short) 0x0080 : 0);
        float[] xt = new float[16];
        xt[0] = 0x1p-10f;
        float[] out = new float[4];
        tiny.matvecNative(xt, 0, out, 0);
        assertThat(out[0]).isEqualTo(0x1p-136f);
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
