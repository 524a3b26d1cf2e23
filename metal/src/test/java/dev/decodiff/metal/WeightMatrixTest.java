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
 * The blocked FMA kernels must give, for every (token, row), exactly the bits of the plain one-row dot product (one
 * fp32 accumulator per row in column order): prefill equals decode, and any thread split gives the same result.
 * The reference here is an independent scalar loop in that same order. The AMX GEMM sums in another order: it is
 * held to the error bound its exact split allows, against a double-precision sum.
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
            "BF16,9,6404,50",
            // rows wider than a column block go through it eight groups at a time: thread chunks of 48 rows (a full
            // eight-group pass, then four groups) and a last chunk of three groups and a row
            "BF16,301,2100,13",
            // many tiles of tokens (three a tile on AVX2, six on AVX-512) and leftover tokens after them
            "BF16,11,1100,100", "F32,10,600,53",
            // fp32 weights (the AVX2 kernels take them natively): column blocks, tiles and leftover tokens, tails
            "F32,37,2100,8", "F32,9,4500,13", "F32,5,4100,2"})
    void matvecAndMatmulAreBitIdenticalToTheOneRowDot(DType dtype, int rows, int cols, int tokens) {
        var w = random(dtype, rows, cols, rows * 31L + cols);
        var rnd = new Random(tokens);
        float[] x = new float[tokens * cols];
        for (int i = 0; i < x.length; i++) x[i] = (float) rnd.nextGaussian();

        boolean nativeToo = dtype == DType.BF16 ? NativeKernels.available() : NativeKernels.f32Available();
        float[] y = new float[tokens * rows], yj = new float[tokens * rows], yn = new float[tokens * rows];
        w.matmul(x, tokens, y, MatmulPrecision.FP32_FMA);
        w.matmulJava(x, tokens, yj);
        if (nativeToo) w.matmulNative(x, tokens, yn);
        if (!NativeKernels.amxAvailable() || dtype != DType.BF16) {
            float[] plain = new float[tokens * rows];
            w.matmul(x, tokens, plain);
            assertThat(plain).as("without AMX the default GEMM is the FMA one").containsExactly(y);
        }
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
        w.matmulFma(x, tokens, y);
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
     * (one token, also from an offset) is held to the same bound, and gives each token the prefill's bits where the
     * prefill does not run on AMX tiles (which sum in another order).
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
                assertThat((double) Math.abs(one[3 + r] - sum)).as("decode t=%d r=%d", t, r).isLessThanOrEqualTo(cols * 0x1p-24 * magnitude);
                if (!NativeKernels.amxAvailable() || tokens == 1)
                    assertThat(Float.floatToRawIntBits(one[3 + r])).as("decode t=%d r=%d", t, r).isEqualTo(Float.floatToRawIntBits(got));
                if (got != exact[t * rows + r]) differs++;
            }
        }
        assertThat(differs).as("activations were rounded to bf16").isGreaterThan(tokens * rows / 2);
    }

    /**
     * The AMX GEMM against a double-precision sum. The bound follows from the split: each activation is split exactly
     * into three bf16 terms of its sign (x = h + l + l2, so |h| + |l| + |l2| = |x|), each term times a bf16 weight is
     * exact in fp32, and the tile adds the products of one output one at a time to one fp32 accumulator — n = 3 per
     * column, the columns padded to a multiple of 32 — so the recursive-summation bound gives |error| ≤ γ_n Σ|w·x|,
     * γ_n = n·u / (1 − n·u), u = 2^-24. Added to that: what the instruction drops, inputs below 2^-126 (at most
     * 2^-126 per term and weight) and subnormal partial sums (2^-126 per addition), and the double sum's own rounding.
     */
    @ParameterizedTest
    @CsvSource({"37,64,2", "130,1536,7", "19,70,5", "21,1100,13", "64,512,33", "70,4200,40", "33,1543,17", "16,32,16",
            // several token chunks, the last one short; rows too wide for a chunk's budget (32 tokens per chunk)
            "48,2048,200", "9,6404,50"})
    void amxGemmIsWithinTheBoundOfItsExactSplit(int rows, int cols, int tokens) {
        if (!NativeKernels.amxAvailable()) return;
        var w = random(DType.BF16, rows, cols, rows * 13L + cols);
        var rnd = new Random(tokens * 5L + cols);
        float[] x = new float[tokens * cols];
        for (int i = 0; i < x.length; i++) x[i] = (float) (rnd.nextGaussian() * Math.exp(rnd.nextGaussian()));
        float[] y = new float[tokens * rows], viaDefault = new float[tokens * rows];
        w.matmulAmx(x, tokens, y);
        w.matmul(x, tokens, viaDefault);
        assertThat(viaDefault).as("the default prefill GEMM is the AMX one here").containsExactly(y);
        double u = 0x1p-24, tiny = 0x1p-126;
        int n = 3 * ((cols + 31) / 32 * 32);
        double gamma = n * u / (1 - n * u);
        for (int t = 0; t < tokens; t++)
            for (int r = 0; r < rows; r++) {
                double sum = 0, magnitude = 0, weights = 0, activations = 0;
                for (int c = 0; c < cols; c++) {
                    double p = (double) w.get(r, c) * x[t * cols + c];
                    sum += p;
                    magnitude += Math.abs(p);
                    weights += Math.abs(w.get(r, c));
                    activations += Math.abs(x[t * cols + c]);
                }
                double bound = gamma * magnitude + tiny * (3 * weights + activations + n) + cols * 0x1p-53 * magnitude;
                assertThat(Math.abs(y[t * rows + r] - sum)).as("t=%d r=%d", t, r).isLessThanOrEqualTo(bound);
            }
    }

    /**
     * The split keeps all 24 bits of every activation: with one nonzero weight per row, a power of two (so each term's
     * product and their sum are exact), every output must be exactly that weight times the activation — a split into
     * two terms would lose the lowest 8 bits, a bf16 rounding 16. An infinite or NaN activation gives what the FMA
     * reference gives (NaN from the zero weights times infinity, the infinity for the row whose weight is there).
     */
    @Test
    void amxSplitKeepsEveryBitOfTheActivations() {
        if (!NativeKernels.amxAvailable()) return;
        int rows = 40, cols = 100, tokens = 21;
        MemorySegment seg = Arena.ofAuto().allocate((long) rows * cols * 2, 64);
        var w = new WeightMatrix("w", DType.BF16, rows, cols, seg);
        for (int r = 0; r < rows; r++)
            seg.setAtIndex(I16, (long) r * cols + (r * 7 % cols), (short) (Float.floatToRawIntBits((r % 2 == 0 ? 1 : -1) * (float) Math.scalb(1.0, r % 9 - 4)) >>> 16));
        var rnd = new Random(9);
        float[] x = new float[tokens * cols];
        for (int i = 0; i < x.length; i++) x[i] = Float.intBitsToFloat((rnd.nextInt(1 << 23) | ((100 + rnd.nextInt(50)) << 23)) ^ (rnd.nextBoolean() ? 0x80000000 : 0));
        x[3 * cols + 7] = Float.POSITIVE_INFINITY; // row 1's column, token 3
        x[5 * cols + 14] = Float.NaN;              // row 2's column, token 5
        float[] y = new float[tokens * rows];
        w.matmulAmx(x, tokens, y);
        int lowBits = 0;
        for (int t = 0; t < tokens; t++)
            for (int r = 0; r < rows; r++) {
                int c = r * 7 % cols;
                float expected = t == 3 || t == 5 ? reference(w, r, x, t * cols) : w.get(r, c) * x[t * cols + c];
                assertThat(Float.floatToRawIntBits(y[t * rows + r]) == Float.floatToRawIntBits(expected) || Float.isNaN(expected) && Float.isNaN(y[t * rows + r]))
                        .as("t=%d r=%d: %s, expected %s", t, r, y[t * rows + r], expected).isTrue();
                if ((Float.floatToRawIntBits(x[t * cols + c]) & 0xff) != 0) lowBits++;
            }
        assertThat(lowBits).as("the activations use their lowest 8 bits").isGreaterThan(tokens * rows / 2);

        // --matmul bf16 on the tiles: the same rows give exactly the weight times the activation rounded as torch rounds.
        w.matmul(x, tokens, y, MatmulPrecision.BF16);
        for (int t = 0; t < tokens; t++)
            for (int r = 0; r < rows; r++) {
                if (t == 3 || t == 5) continue; // 0 · ∞ and NaN, as above
                int c = r * 7 % cols;
                float expected = w.get(r, c) * BFloat16.widen(BFloat16.round(x[t * cols + c]));
                assertThat(Float.floatToRawIntBits(y[t * rows + r])).as("bf16 t=%d r=%d", t, r).isEqualTo(Float.floatToRawIntBits(expected));
            }
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
        if (NativeKernels.available() && NativeKernels.amxOnCpu() && !"off".equals(System.getProperty("decodiff.amx")))
            assertThat(NativeKernels.amxAvailable()).as("this CPU has AMX tiles: " + NativeKernels.status()).isTrue();
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

    /** Decode's shared matvec (gate and up in one parallel call) gives each matrix the bits of its own matvec. */
    @ParameterizedTest
    @CsvSource({"6144,6144,1536", "100,37,64", "64,1,200", "1,129,48"})
    void matvecAllOfTwoGivesEachMatrixItsOwnMatvecBits(int rowsA, int rowsB, int cols) {
        if (!NativeKernels.available()) return;
        var a = random(DType.BF16, rowsA, cols, rowsA + 7L * cols);
        var b = random(DType.BF16, rowsB, cols, rowsB + 11L * cols);
        float[] x = new float[cols];
        var rnd = new Random(cols);
        for (int i = 0; i < cols; i++) x[i] = (float) rnd.nextGaussian();
        float[] ya = new float[rowsA + 5], yb = new float[rowsB + 5], ra = new float[rowsA], rb = new float[rowsB];
        WeightMatrix.matvecAll(new WeightMatrix[]{a, b}, x, new float[][]{ya, yb});
        a.matvec(x, 0, ra, 0);
        b.matvec(x, 0, rb, 0);
        assertThat(java.util.Arrays.copyOf(ya, rowsA)).containsExactly(ra);
        assertThat(java.util.Arrays.copyOf(yb, rowsB)).containsExactly(rb);
        assertThat(ya[rowsA]).as("nothing written past a's rows").isZero();
        assertThat(yb[rowsB]).isZero();
    }

    /** Decode's q/k/v in one call, gate/up paired with their activation, the head with its soft-cap: the Java kernels' bits. */
    @ParameterizedTest
    @CsvSource({"2048,256,256,1536", "100,37,5,64", "1,129,64,48"})
    void decodesFusedMatvecsGiveEachMatrixTheJavaKernelsBits(int rowsQ, int rowsK, int rowsV, int cols) {
        if (!NativeKernels.available()) return;
        var q = random(DType.BF16, rowsQ, cols, rowsQ + 3L * cols);
        var k = random(DType.BF16, rowsK, cols, rowsK + 5L * cols);
        var v = random(DType.BF16, rowsV, cols, rowsV + 9L * cols);
        float[] x = new float[cols];
        var rnd = new Random(cols + 1);
        for (int i = 0; i < cols; i++) x[i] = (float) rnd.nextGaussian();
        float[] yq = new float[rowsQ], yk = new float[rowsK], yv = new float[rowsV];
        float[] rq = new float[rowsQ], rk = new float[rowsK], rv = new float[rowsV];
        q.matvecJava(x, 0, rq, 0);
        k.matvecJava(x, 0, rk, 0);
        v.matvecJava(x, 0, rv, 0);
        WeightMatrix.matvecAll(new WeightMatrix[]{q, k, v}, x, new float[][]{yq, yk, yv});
        assertThat(yq).containsExactly(rq);
        assertThat(yk).containsExactly(rk);
        assertThat(yv).containsExactly(rv);

        var up = random(DType.BF16, rowsQ, cols, rowsQ + 13L * cols);
        float[] ru = new float[rowsQ], g = new float[rowsQ], u = new float[rowsQ], expected = new float[rowsQ];
        up.matvecJava(x, 0, ru, 0);
        for (int r = 0; r < rowsQ; r++) expected[r] = Transcendentals.geluTanh(rq[r]) * ru[r];
        WeightMatrix.matvecPaired(q, up, x, g, u, (from, to) -> Transcendentals.geluTanhTimes(g, u, from, to));
        assertThat(g).containsExactly(expected);

        float[] logits = new float[rowsQ], capped = rq.clone();
        Transcendentals.softcap(capped, 0, rowsQ, 30f);
        q.matvecThen(x, 0, logits, (from, to) -> Transcendentals.softcap(logits, from, to, 30f));
        assertThat(logits).containsExactly(capped);
    }

    @ParameterizedTest
    @CsvSource({"1000,7", "5,1", "64,64", "100000,16"})
    void parallelRunsEveryIndexOnce(int n, int grain) {
        int[] hits = new int[n];
        for (int rep = 0; rep < 50; rep++) Parallel.forRange(n, grain, (from, to) -> {
            for (int i = from; i < to; i++) hits[i]++;
        });
        for (int rep = 0; rep < 50; rep++) Parallel.forRangeGuided(n, grain, (from, to) -> {
            assertThat(from % grain).as("a guided chunk starts on a grain").isZero();
            for (int i = from; i < to; i++) hits[i]++;
        });
        var pieces = new java.util.concurrent.atomic.AtomicInteger();
        for (int rep = 0; rep < 50; rep++) Parallel.forRangeInHalves(n, grain, (from, to) -> {
            assertThat(from % grain).as("a piece starts on a grain").isZero();
            pieces.incrementAndGet();
            for (int i = from; i < to; i++) hits[i]++;
        });
        for (int i = 0; i < n; i++) assertThat(hits[i]).isEqualTo(150);
    }

    /** Decode's split: one large piece per thread and a short tail, so a 2,048-row matvec is a few kernel passes, not a dozen. */
    @Test
    void aMatvecInHalvesIsAFewPieces() {
        var pieces = new java.util.concurrent.ConcurrentLinkedQueue<int[]>();
        Parallel.forRangeInHalves(2048, 64, (from, to) -> pieces.add(new int[]{from, to}));
        assertThat(pieces).hasSizeLessThanOrEqualTo(Parallel.threads() + 2);
        if (Parallel.threads() > 1) assertThat(pieces).anySatisfy(p -> assertThat(p[1] - p[0]).isGreaterThanOrEqualTo(2048 * 15 / 16 / Parallel.threads() / 64 * 64));
    }
}
