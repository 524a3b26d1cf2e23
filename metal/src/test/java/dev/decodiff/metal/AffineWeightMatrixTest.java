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
import static org.assertj.core.api.Assumptions.assumeThat;

/**
 * Matrices kept as MLX affine codes against the same matrices dequantized here, independently: codes packed by this
 * test (little-endian bit order, as MLX's uint32 words), each weight computed as scale·q + bias in Java fp32, then an
 * independent scalar dot in the kernels' order (16 lane accumulators in column order, one fused multiply-add each,
 * lanes summed in order). The native matvec, the native GEMM, the shared gate/up matvec and the Java kernels must all
 * give those bits, for every bit width the kernels take, every group size, every scale dtype, row counts off the
 * kernels' row groups and token counts off their tiles.
 */
class AffineWeightMatrixTest {
    private static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /** A random affine matrix and its dequantized weights, made by this test. */
    record Case(WeightMatrix packed, float[] weights) {}

    static Case random(int bits, int group, DType pairType, int rows, int cols, long seed) {
        var rnd = new Random(seed);
        int groups = cols / group;
        var codes = Arena.ofAuto().allocate(Math.max(1, (long) rows * cols * bits / 8), 64);
        var pairs = Arena.ofAuto().allocate(Math.max(1, (long) rows * groups * 2 * pairType.bytes()), 64);
        float[] w = new float[rows * cols];
        int[] q = new int[rows * cols];
        for (int i = 0; i < q.length; i++) q[i] = rnd.nextInt(1 << bits);
        // every code value, the largest included, in the first row
        for (int c = 0; c < Math.min(cols, 1 << bits); c++) q[c] = (1 << bits) - 1 - c;
        for (int r = 0; r < rows; r++) {
            long rb = (long) r * cols * bits / 8;
            for (int c = 0; c < cols; c++) {
                int v = q[r * cols + c];
                if (bits == 8) codes.set(ValueLayout.JAVA_BYTE, rb + c, (byte) v);
                else {
                    long at = rb + c / 2;
                    int old = codes.get(ValueLayout.JAVA_BYTE, at) & 0xff;
                    codes.set(ValueLayout.JAVA_BYTE, at, (byte) (c % 2 == 0 ? (old & 0xf0) | v : (old & 0x0f) | v << 4));
                }
            }
            for (int g = 0; g < groups; g++) {
                float s = stored(pairType, pairs, 2L * (r * groups + g), (float) (rnd.nextGaussian() * 0.02));
                float b = stored(pairType, pairs, 2L * (r * groups + g) + 1, (float) (rnd.nextGaussian() * 0.1));
                for (int c = g * group; c < (g + 1) * group; c++) w[r * cols + c] = s * q[r * cols + c] + b;
            }
        }
        return new Case(WeightMatrix.affine("q", rows, cols, codes, new AffineGroups(bits, group, pairType, pairs)), w);
    }

    /** Stores v as pairType at index i and returns the stored value widened to fp32. */
    private static float stored(DType pairType, MemorySegment pairs, long i, float v) {
        switch (pairType) {
            case F32 -> pairs.setAtIndex(F32, i, v);
            case BF16 -> {
                short h = (short) (Float.floatToRawIntBits(v) >>> 16);
                pairs.setAtIndex(I16, i, h);
                return Float.intBitsToFloat((h & 0xffff) << 16);
            }
            case F16 -> {
                short h = Float.floatToFloat16(v);
                pairs.setAtIndex(I16, i, h);
                return Float.float16ToFloat(h);
            }
            default -> throw new IllegalArgumentException(pairType.toString());
        }
        return v;
    }

    /** The reference dot of row r (cols a multiple of 16: no tail). */
    static float reference(float[] w, int cols, int r, float[] x, int xOff) {
        float[] acc = new float[16];
        for (int c = 0; c < cols; c += 16)
            for (int k = 0; k < 16; k++) acc[k] = Math.fma(w[r * cols + c + k], x[xOff + c + k], acc[k]);
        float s = 0f;
        for (int k = 0; k < 16; k++) s += acc[k];
        return s;
    }

    static float[] activations(int n, long seed) {
        var rnd = new Random(seed);
        float[] x = new float[n];
        for (int i = 0; i < n; i++) x[i] = (float) rnd.nextGaussian();
        return x;
    }

    @ParameterizedTest(name = "{0}-bit g{1} {2} [{3}, {4}] × {5} tokens")
    @CsvSource({
            "4,64,BF16,37,256,1", "4,32,BF16,8,64,7", "4,128,BF16,19,384,6", "4,64,F16,13,128,13", "4,32,F32,70,96,5",
            "8,64,BF16,37,256,1", "8,32,BF16,9,64,6", "8,128,F16,21,512,13", "8,64,F32,5,192,2",
            // a column block and a half of the GEMM (2048 columns a block), several row groups, a leftover row
            "4,64,BF16,41,3072,8", "8,128,BF16,25,2560,14",
            // decode's shapes in small: a wide row, rows in several guided pieces
            "4,64,BF16,300,1536,1", "8,64,BF16,130,1536,1",
            // rows wider than the matvec keeps its permuted activations for on the stack
            "4,128,BF16,9,16512,2"})
    void everyKernelGivesTheBitsOfTheDequantizedDot(int bits, int group, DType pairType, int rows, int cols, int tokens) {
        var c = random(bits, group, pairType, rows, cols, bits * 1000L + group + rows * 7L + cols);
        var w = c.packed();
        for (int r = 0; r < rows; r += Math.max(1, rows / 5))
            for (int col = 0; col < cols; col++)
                assertThat(Float.floatToRawIntBits(w.get(r, col))).as("element (%d, %d)", r, col).isEqualTo(Float.floatToRawIntBits(c.weights()[r * cols + col]));
        float[] x = activations(tokens * cols, tokens * 31L + cols);
        float[] ref = new float[tokens * rows];
        for (int t = 0; t < tokens; t++)
            for (int r = 0; r < rows; r++) ref[t * rows + r] = reference(c.weights(), cols, r, x, t * cols);

        float[] y = new float[tokens * rows];
        w.matmul(x, tokens, y);
        assertBits(y, ref, "matmul");
        w.matmul(x, tokens, y, MatmulPrecision.BF16);
        assertBits(y, ref, "matmul at --matmul bf16 (packed weights take the exact path)");
        float[] yj = new float[tokens * rows];
        w.matmulJava(x, tokens, yj);
        assertBits(yj, ref, "matmulJava");
        for (int t = 0; t < tokens; t++) {
            float[] yv = new float[rows + 3];
            w.matvec(x, t * cols, yv, 3);
            for (int r = 0; r < rows; r++)
                assertThat(Float.floatToRawIntBits(yv[3 + r])).as("matvec t=%d r=%d", t, r).isEqualTo(Float.floatToRawIntBits(ref[t * rows + r]));
        }
        if (NativeKernels.affineAvailable()) {
            float[] yn = new float[tokens * rows];
            w.matmulNative(x, tokens, yn);
            assertBits(yn, ref, "matmulNative");
        }
    }

    @Test
    void matvecAllOfTwoGivesEachPackedMatrixItsOwnBits() {
        assumeThat(NativeKernels.affineAvailable()).as(NativeKernels.status()).isTrue();
        var a = random(4, 64, DType.BF16, 203, 512, 1);
        var b = random(8, 32, DType.BF16, 77, 512, 2);
        float[] x = activations(512, 3), ya = new float[203], yb = new float[77];
        assertThat(WeightMatrix.canShareMatvec(a.packed(), b.packed())).isTrue();
        WeightMatrix.matvecAll(new WeightMatrix[]{a.packed(), b.packed()}, x, new float[][]{ya, yb});
        for (int r = 0; r < 203; r++) assertThat(ya[r]).isEqualTo(reference(a.weights(), 512, r, x, 0));
        for (int r = 0; r < 77; r++) assertThat(yb[r]).isEqualTo(reference(b.weights(), 512, r, x, 0));
    }

    /** Decode's q, k and v projections in one parallel call: each matrix's rows get the bits of the dequantized dot. */
    @Test
    void matvecAllGivesEachPackedMatrixItsOwnBits() {
        assumeThat(NativeKernels.affineAvailable()).as(NativeKernels.status()).isTrue();
        var q = random(4, 64, DType.BF16, 517, 768, 11);
        var k = random(4, 64, DType.BF16, 64, 768, 12);
        var v = random(8, 64, DType.BF16, 33, 768, 13);
        float[] x = activations(768, 14), yq = new float[517], yk = new float[64], yv = new float[33 + 4];
        WeightMatrix.matvecAll(new WeightMatrix[]{q.packed(), k.packed(), v.packed()}, x, new float[][]{yq, yk, yv});
        for (int r = 0; r < 517; r++) assertThat(yq[r]).as("q row %d", r).isEqualTo(reference(q.weights(), 768, r, x, 0));
        for (int r = 0; r < 64; r++) assertThat(yk[r]).as("k row %d", r).isEqualTo(reference(k.weights(), 768, r, x, 0));
        for (int r = 0; r < 33; r++) assertThat(yv[r]).as("v row %d", r).isEqualTo(reference(v.weights(), 768, r, x, 0));
        assertThat(yv[33]).as("nothing written past v's rows").isZero();
    }

    /**
     * Decode's gate and up with the activation run on each piece of rows: every row is handed to the callback once,
     * after both of its outputs hold the dequantized dots, and the head's soft-cap path (matvecThen) alike.
     */
    @Test
    void matvecPairedAndThenHandEachRowOnceWithItsOutputsDone() {
        assumeThat(NativeKernels.affineAvailable()).as(NativeKernels.status()).isTrue();
        int rows = 1031, cols = 512;
        var a = random(4, 64, DType.BF16, rows, cols, 21);
        var b = random(4, 64, DType.BF16, rows, cols, 22);
        float[] x = activations(cols, 23), ya = new float[rows], yb = new float[rows];
        float[] ra = new float[rows], rb = new float[rows];
        for (int r = 0; r < rows; r++) {
            ra[r] = reference(a.weights(), cols, r, x, 0);
            rb[r] = reference(b.weights(), cols, r, x, 0);
        }
        int[] seen = new int[rows];
        boolean[] ready = new boolean[rows];
        WeightMatrix.matvecPaired(a.packed(), b.packed(), x, ya, yb, (from, to) -> {
            for (int r = from; r < to; r++) {
                seen[r]++;
                ready[r] = ya[r] == ra[r] && yb[r] == rb[r];
            }
        });
        for (int r = 0; r < rows; r++) {
            assertThat(seen[r]).as("row %d handed to the activation", r).isEqualTo(1);
            assertThat(ready[r]).as("row %d computed before its activation ran", r).isTrue();
        }
        float[] y = new float[rows];
        int[] capped = new int[rows];
        a.packed().matvecThen(x, 0, y, (from, to) -> {
            for (int r = from; r < to; r++) capped[r] += y[r] == ra[r] ? 1 : 100;
        });
        for (int r = 0; r < rows; r++) assertThat(capped[r]).as("row %d: once, after its dot", r).isEqualTo(1);
        assertThat(y).containsExactly(ra);
    }

    @Test
    void aSliceOfRowsIsThoseRowsOfTheMatrix() {
        var c = random(4, 32, DType.F16, 24, 128, 5);
        var s = c.packed().slice(8, 8);
        float[] x = activations(128, 6), y = new float[8];
        s.matvec(x, 0, y, 0);
        for (int r = 0; r < 8; r++) assertThat(y[r]).isEqualTo(reference(c.weights(), 128, 8 + r, x, 0));
        assertThat(s.bytes()).isEqualTo(8L * 128 / 2 + 8L * 4 * 2 * 2);
    }

    @Test
    void theAffineKernelsLoadWhereTheCpuHasThem() {
        if (!NativeKernels.expectedHere()) return;
        String flags;
        try {
            flags = java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc/cpuinfo")).stream().filter(l -> l.startsWith("flags")).findFirst().orElse("") + " ";
        } catch (java.io.IOException e) {
            throw new AssertionError(e);
        }
        boolean cpu = flags.contains(" avx512vbmi ") && flags.contains(" f16c ") && flags.contains(" avx512bw ");
        assertThat(NativeKernels.affineAvailable()).as(NativeKernels.status()).isEqualTo(cpu && NativeKernels.available());
    }

    @Test
    void specialActivationsGiveTheSameBits() {
        var c = random(4, 64, DType.BF16, 16, 128, 9);
        float[] x = activations(2 * 128, 10);
        x[3] = Float.MIN_VALUE;
        x[17] = -0f;
        x[40] = 1e-40f;
        x[128 + 5] = Float.MAX_VALUE;
        x[128 + 6] = Float.NaN;
        float[] y = new float[32];
        c.packed().matmul(x, 2, y);
        for (int t = 0; t < 2; t++)
            for (int r = 0; r < 16; r++)
                assertThat(Float.floatToRawIntBits(y[t * 16 + r])).as("t=%d r=%d", t, r)
                        .isEqualTo(Float.floatToRawIntBits(reference(c.weights(), 128, r, x, t * 128)));
    }

    private static void assertBits(float[] got, float[] want, String what) {
        for (int i = 0; i < want.length; i++)
            assertThat(Float.floatToRawIntBits(got[i])).as("%s [%d]", what, i).isEqualTo(Float.floatToRawIntBits(want[i]));
    }
}
