package dev.decodiff.metal;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.util.Arrays;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assumptions.assumeThat;

/**
 * Matrices kept as MLX affine codes against the same matrices dequantized here, independently: codes packed by this
 * test (little-endian bit order, as MLX's uint32 words), each weight computed as scale·q + bias in Java fp32, then an
 * independent scalar dot in the kernels' order (16 lane accumulators in column order, one fused multiply-add each,
 * lanes summed in order). The native GEMM and the Java kernels must give those bits; the native matvec (decode's
 * integer kernel) must give the bits of its documented formula, computed here from the test's own codes, and stay
 * within an error bound of the exact (fp64) dot — for every bit width the kernels take, every group size, every scale
 * dtype, row counts off the kernels' row blocks and token counts off their tiles.
 */
class AffineWeightMatrixTest {
    private static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /** A random affine matrix and its dequantized weights, made by this test. */
    record Case(WeightMatrix packed, float[] weights, int[] codes, float[] scales, float[] biases, int group) {}

    static Case random(int bits, int group, DType pairType, int rows, int cols, long seed) {
        return random(bits, group, pairType, rows, cols, seed, 0);
    }

    static Case random(int bits, int group, DType pairType, int rows, int cols, long seed, int segmentRows) {
        var rnd = new Random(seed);
        int[] q = new int[rows * cols];
        for (int i = 0; i < q.length; i++) q[i] = rnd.nextInt(1 << bits);
        // every code value, the largest included, in the first row
        for (int c = 0; c < Math.min(cols, 1 << bits); c++) q[c] = (1 << bits) - 1 - c;
        return withCodes(bits, group, pairType, rows, cols, q, rnd, segmentRows);
    }

    /** A matrix of these codes (row-major) and random scales and biases. */
    static Case withCodes(int bits, int group, DType pairType, int rows, int cols, int[] q, Random rnd, int segmentRows) {
        return withCodes(bits, group, pairType, rows, cols, q, rnd, segmentRows, 0.02);
    }

    /** The same with scales of standard deviation {@code scaleSd}. */
    static Case withCodes(int bits, int group, DType pairType, int rows, int cols, int[] q, Random rnd, int segmentRows, double scaleSd) {
        int groups = cols / group;
        var codes = Arena.ofAuto().allocate(Math.max(1, (long) rows * cols * bits / 8), 64);
        var pairs = Arena.ofAuto().allocate(Math.max(1, (long) rows * groups * 2 * pairType.bytes()), 64);
        float[] w = new float[rows * cols], sc = new float[rows * groups], bi = new float[rows * groups];
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
                float s = stored(pairType, pairs, 2L * (r * groups + g), (float) (rnd.nextGaussian() * scaleSd));
                float b = stored(pairType, pairs, 2L * (r * groups + g) + 1, (float) (rnd.nextGaussian() * 0.1));
                sc[r * groups + g] = s;
                bi[r * groups + g] = b;
                for (int c = g * group; c < (g + 1) * group; c++) w[r * cols + c] = s * q[r * cols + c] + b;
            }
        }
        return new Case(WeightMatrix.affine("q", rows, cols, codes, new AffineGroups(bits, group, pairType, pairs, segmentRows)), w, q, sc, bi, group);
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

    /**
     * Decode's integer dot of row r as decodiff_kernels.c documents it, from the test's own codes and pairs: per group,
     * x as m = rint(x · 2^(30-e)) (2^(e-1) <= max|x| < 2^e) in four signed bytes, exact integer sums P_k of code times
     * byte, f = fl(fl(P2 + 2^8 P3) · 2^16 + fl(P0 + 2^8 P1)), acc = fl(fl(s · 2^(e-30)) · f + acc), acc = fl(b · X + acc).
     * Null where the kernel takes the fp32 path (activations not finite, or a group's largest below 2^-97).
     */
    static Float integerDot(Case c, int cols, int r, float[] x, int xOff) {
        int group = c.group(), groups = cols / group;
        float acc = 0f;
        for (int g = 0; g < groups; g++) {
            float max = 0f;
            for (int i = g * group; i < (g + 1) * group; i++) {
                if (!Float.isFinite(x[xOff + i])) return null;
                max = Math.max(max, Math.abs(x[xOff + i]));
            }
            int e = max > 0 ? Math.getExponent(max) + 1 : 0;
            if (max > 0 && e < -96) return null;
            int[] p = new int[4];
            long sum = 0;
            for (int i = g * group; i < (g + 1) * group; i++) {
                int m = (int) Math.rint(x[xOff + i] * Math.scalb(1.0, 30 - e));
                sum += m;
                int q = c.codes()[r * cols + i];
                for (int k = 0; k < 4; k++) {
                    int b = (byte) m;
                    p[k] += q * b;
                    m = (m - b) >> 8;
                }
            }
            float pw = Math.scalb(1f, e - 30);
            float f = Math.fma((float) (p[2] + (p[3] << 8)), 65536f, (float) (p[0] + (p[1] << 8)));
            acc = Math.fma(c.scales()[r * groups + g] * pw, f, acc);
            acc = Math.fma(c.biases()[r * groups + g], (float) sum * pw, acc);
        }
        return acc;
    }

    /** The exact dot of row r (fp64 over the test's fp32 weights, which scale·q + bias gives exactly for 16-bit pairs). */
    static double exactDot(Case c, int cols, int r, float[] x, int xOff) {
        double s = 0;
        for (int i = 0; i < cols; i++) s += (double) c.weights()[r * cols + i] * x[xOff + i];
        return s;
    }

    /**
     * What the integer dot may be off the exact one: each activation's fixed-point error (at most 2^(e-31)) times its
     * weight, and per group a few roundings of at most 2^-24 each of the group's absolute sum, carried by the
     * accumulator through the later groups.
     */
    static double integerBound(Case c, int cols, int r, float[] x, int xOff) {
        int group = c.group(), groups = cols / group;
        double fixed = 0, abs = 0;
        for (int g = 0; g < groups; g++) {
            float max = 0f;
            for (int i = g * group; i < (g + 1) * group; i++) max = Math.max(max, Math.abs(x[xOff + i]));
            int e = max > 0 ? Math.getExponent(max) + 1 : 0;
            for (int i = g * group; i < (g + 1) * group; i++) {
                fixed += Math.abs(c.weights()[r * cols + i]) * Math.scalb(1.0, e - 31);
                abs += (Math.abs(c.scales()[r * groups + g]) * c.codes()[r * cols + i] + Math.abs(c.biases()[r * groups + g])) * Math.abs(x[xOff + i]);
            }
        }
        return fixed + (groups + 4) * Math.scalb(abs, -23);
    }

    /** Decode's matvec of row r: its formula's bits, within its bound of the exact dot; the Java kernels' fp32 bits where the native ones are off. */
    static void assertDecodeRow(Case c, int cols, int r, float[] x, int xOff, float got, String what) {
        if (!NativeKernels.affineAvailable()) {
            assertThat(Float.floatToRawIntBits(got)).as(what).isEqualTo(Float.floatToRawIntBits(reference(c.weights(), cols, r, x, xOff)));
            return;
        }
        Float want = integerDot(c, cols, r, x, xOff);
        if (want == null) want = reference(c.weights(), cols, r, x, xOff);
        assertThat(Float.floatToRawIntBits(got)).as("%s: %s, the integer dot's bits %s", what, got, want).isEqualTo(Float.floatToRawIntBits(want));
        double exact = exactDot(c, cols, r, x, xOff);
        if (Double.isFinite(exact)) assertThat(Math.abs(got - exact)).as("%s: off the exact dot %s", what, exact).isLessThanOrEqualTo(integerBound(c, cols, r, x, xOff));
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
            // many tiles of tokens (three a tile on AVX2, six on AVX-512) and leftover tokens after them
            "4,64,BF16,21,256,100",
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
        if (tokens > 1) assertBits(y, ref, "matmul");
        else for (int r = 0; r < rows; r++) assertDecodeRow(c, cols, r, x, 0, y[r], "matmul of one token (the matvec) r=" + r);
        w.matmul(x, tokens, y, MatmulPrecision.BF16);
        if (tokens > 1) assertBits(y, ref, "matmul at --matmul bf16 (packed weights take the exact path)");
        float[] yj = new float[tokens * rows];
        w.matmulJava(x, tokens, yj);
        assertBits(yj, ref, "matmulJava");
        for (int t = 0; t < tokens; t++) {
            float[] yv = new float[rows + 3];
            w.matvec(x, t * cols, yv, 3);
            for (int r = 0; r < rows; r++) assertDecodeRow(c, cols, r, x, t * cols, yv[3 + r], "matvec t=" + t + " r=" + r);
        }
        if (NativeKernels.affineAvailable()) {
            float[] yn = new float[tokens * rows];
            w.matmulNative(x, tokens, yn);
            if (tokens > 1) assertBits(yn, ref, "matmulNative");
        }
    }

    /**
     * Over many rows the integer dot is closer to the exact one than the fp32 chain it replaced (the point of its
     * exact sums), and outliers in a group (the activations a norm leaves) do not change that.
     */
    @Test
    void decodeIsCloserToTheExactDotThanTheFp32Chain() {
        assumeThat(NativeKernels.affineAvailable()).as(NativeKernels.status()).isTrue();
        for (int bits : new int[]{4, 8}) {
            int rows = 512, cols = 1536;
            var c = random(bits, 64, DType.BF16, rows, cols, 40 + bits);
            float[] x = activations(cols, 41);
            for (int i = 0; i < cols; i += 97) x[i] *= 40f;
            float[] y = new float[rows];
            c.packed().matvec(x, 0, y, 0);
            double di = 0, df = 0, n = 0;
            for (int r = 0; r < rows; r++) {
                double exact = exactDot(c, cols, r, x, 0), chain = reference(c.weights(), cols, r, x, 0);
                di += (y[r] - exact) * (y[r] - exact);
                df += (chain - exact) * (chain - exact);
                n += exact * exact;
            }
            assertThat(Math.sqrt(di / n)).as("%d-bit: integer dot's rel L2 to the exact dot, against the fp32 chain's %s", bits, Math.sqrt(df / n))
                    .isLessThan(Math.sqrt(df / n)).isGreaterThan(0);
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
        for (int r = 0; r < 203; r++) assertDecodeRow(a, 512, r, x, 0, ya[r], "a row " + r);
        for (int r = 0; r < 77; r++) assertDecodeRow(b, 512, r, x, 0, yb[r], "b row " + r);
    }

    /** Decode's q, k and v projections in one parallel call: each matrix's rows get the bits of their own integer dot. */
    @Test
    void matvecAllGivesEachPackedMatrixItsOwnBits() {
        assumeThat(NativeKernels.affineAvailable()).as(NativeKernels.status()).isTrue();
        var q = random(4, 64, DType.BF16, 517, 768, 11);
        var k = random(4, 64, DType.BF16, 64, 768, 12);
        var v = random(8, 64, DType.BF16, 33, 768, 13);
        float[] x = activations(768, 14), yq = new float[517], yk = new float[64], yv = new float[33 + 4];
        WeightMatrix.matvecAll(new WeightMatrix[]{q.packed(), k.packed(), v.packed()}, x, new float[][]{yq, yk, yv});
        for (int r = 0; r < 517; r++) assertDecodeRow(q, 768, r, x, 0, yq[r], "q row " + r);
        for (int r = 0; r < 64; r++) assertDecodeRow(k, 768, r, x, 0, yk[r], "k row " + r);
        for (int r = 0; r < 33; r++) assertDecodeRow(v, 768, r, x, 0, yv[r], "v row " + r);
        assertThat(yv[33]).as("nothing written past v's rows").isZero();
    }

    /**
     * Decode's gate and up with the activation run on each piece of rows: every row is handed to the callback once,
     * after both of its outputs hold their integer dots, and the head's soft-cap path (matvecThen) alike.
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
            ra[r] = integerDot(a, cols, r, x, 0);
            rb[r] = integerDot(b, cols, r, x, 0);
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

    /** A stack of 20-row matrices (experts: a whole 16-row block and 4 rows after it each) sliced into them. */
    @Test
    void aSliceOfAStackIsThatMatrix() {
        var c = random(4, 32, DType.F16, 60, 128, 5, 20);
        var s = c.packed().slice(20, 20);
        float[] x = activations(128, 6), y = new float[20];
        s.matvec(x, 0, y, 0);
        for (int r = 0; r < 20; r++) {
            var row = new Case(null, Arrays.copyOfRange(c.weights(), (20 + r) * 128, (21 + r) * 128),
                    Arrays.copyOfRange(c.codes(), (20 + r) * 128, (21 + r) * 128),
                    Arrays.copyOfRange(c.scales(), (20 + r) * 4, (21 + r) * 4), Arrays.copyOfRange(c.biases(), (20 + r) * 4, (21 + r) * 4), 32);
            assertDecodeRow(row, 128, 0, x, 0, y[r], "slice row " + r);
            for (int col = 0; col < 128; col++) assertThat(s.get(r, col)).isEqualTo(c.weights()[(20 + r) * 128 + col]);
        }
        assertThat(s.bytes()).isEqualTo(20L * 128 / 2 + 20L * 4 * 2 * 2);
        assertThatThrownBy(() -> c.packed().slice(8, 16)).hasMessageContaining("whole segments");
    }

    /** A table kept as stored (row lookups, E2B's per-layer embeddings): its rows are the dequantized ones, its products the fp32 chain's. */
    @Test
    void aTableKeptAsStoredReadsItsRowsWhereTheyAre() {
        for (int bits : new int[]{4, 8}) {
            int rows = 37, cols = 192;
            var rnd = new Random(bits);
            var c = random(bits, 64, DType.BF16, rows, cols, 70 + bits);
            // the stored codes again, as MLX writes them (random() blocked a copy of its own)
            var stored = Arena.ofAuto().allocate((long) rows * cols * bits / 8);
            for (int r = 0; r < rows; r++)
                for (int col = 0; col < cols; col++) {
                    int q = c.codes()[r * cols + col];
                    long at = ((long) r * cols + col) * bits / 8;
                    int old = stored.get(ValueLayout.JAVA_BYTE, at) & 0xff;
                    stored.set(ValueLayout.JAVA_BYTE, at, (byte) (bits == 8 ? q : col % 2 == 0 ? (old & 0xf0) | q : (old & 0x0f) | q << 4));
                }
            var pairs = Arena.ofAuto().allocate((long) rows * 3 * 4);
            for (int i = 0; i < rows * 3; i++) {
                pairs.set(ValueLayout.JAVA_SHORT_UNALIGNED, 4L * i, (short) (Float.floatToRawIntBits(c.scales()[i]) >>> 16));
                pairs.set(ValueLayout.JAVA_SHORT_UNALIGNED, 4L * i + 2, (short) (Float.floatToRawIntBits(c.biases()[i]) >>> 16));
            }
            var t = WeightMatrix.affineAsStored("table", rows, cols, stored, new AffineGroups(bits, 64, DType.BF16, pairs));
            float[] row = new float[cols];
            int r = rnd.nextInt(rows);
            t.row(r, row, 0);
            assertThat(row).containsExactly(Arrays.copyOfRange(c.weights(), r * cols, (r + 1) * cols));
            float[] x = activations(cols, 71), y = new float[rows];
            t.matvec(x, 0, y, 0);
            for (int i = 0; i < rows; i++) assertThat(y[i]).as("row %d", i).isEqualTo(reference(c.weights(), cols, i, x, 0));
            var s = t.slice(5, 3);
            for (int col = 0; col < cols; col++) assertThat(s.get(1, col)).isEqualTo(c.weights()[6 * cols + col]);
            // mapped from a file, as a checkpoint's table is: the lookups' advice covers its rows' bytes, the last one included
            try {
                var file = Files.createTempFile("decodiff-table", ".bin");
                Files.write(file, stored.toArray(ValueLayout.JAVA_BYTE));
                try (var ch = FileChannel.open(file); var arena = Arena.ofConfined()) {
                    var mapped = ch.map(FileChannel.MapMode.READ_ONLY, 0, stored.byteSize(), arena);
                    var m = WeightMatrix.affineAsStored("table", rows, cols, mapped, new AffineGroups(bits, 64, DType.BF16, pairs));
                    m.adviseLookups(new int[]{0, rows - 1});
                    m.row(rows - 1, row, 0);
                    assertThat(row).containsExactly(Arrays.copyOfRange(c.weights(), (rows - 1) * cols, rows * cols));
                } finally {
                    Files.delete(file);
                }
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }

    /** The Java blocking (where the native kernels are off) writes the native bytes, codes and pairs, for each layout. */
    @ParameterizedTest(name = "{0}-bit {1} [{2}, 128] segments of {3}")
    @CsvSource({"4,BF16,37,0", "8,F32,21,0", "4,F16,60,20", "8,BF16,48,16"})
    void javaBlockingWritesTheNativeBytes(int bits, DType pairType, int rows, int segment) {
        assumeThat(NativeKernels.affineAvailable()).as(NativeKernels.status()).isTrue();
        var rnd = new Random(rows * 31L + bits);
        long codeBytes = (long) rows * 128 * bits / 8, pairBytes = (long) rows * (128 / 32) * 2 * pairType.bytes();
        var stored = Arena.ofAuto().allocate(codeBytes);
        for (long i = 0; i < codeBytes; i++) stored.set(ValueLayout.JAVA_BYTE, i, (byte) rnd.nextInt());
        MemorySegment[] pairs = {Arena.ofAuto().allocate(pairBytes), Arena.ofAuto().allocate(pairBytes)}, out = {Arena.ofAuto().allocate(codeBytes), Arena.ofAuto().allocate(codeBytes)};
        for (long i = 0; i < pairBytes; i++) pairs[0].set(ValueLayout.JAVA_BYTE, i, (byte) rnd.nextInt());
        pairs[1].copyFrom(pairs[0]);
        for (int k = 0; k < 2; k++) new AffineGroups(bits, 32, pairType, pairs[k], segment).block(stored, rows, 128, out[k], k == 0);
        assertThat(out[1].toArray(ValueLayout.JAVA_BYTE)).as("codes").isEqualTo(out[0].toArray(ValueLayout.JAVA_BYTE));
        assertThat(pairs[1].toArray(ValueLayout.JAVA_BYTE)).as("pairs").isEqualTo(pairs[0].toArray(ValueLayout.JAVA_BYTE));
    }

    /** Activations the integer kernel cannot hold (not finite, or a group of them below 2^-97) take the fp32 chain for the call. */
    @Test
    void decodeOfActivationsOutsideTheFixedPointRangeIsTheFp32Chain() {
        var c = random(4, 64, DType.BF16, 40, 128, 9);
        float[] x = activations(128, 10), y = new float[40];
        x[70] = Float.NaN;
        c.packed().matvec(x, 0, y, 0);
        for (int r = 0; r < 40; r++) assertThat(y[r]).as("row %d", r).isNaN();
        x = activations(128, 11);
        for (int i = 0; i < 64; i++) x[i] *= 1e-35f;
        c.packed().matvec(x, 0, y, 0);
        for (int r = 0; r < 40; r++)
            assertThat(Float.floatToRawIntBits(y[r])).as("row %d", r).isEqualTo(Float.floatToRawIntBits(reference(c.weights(), 128, r, x, 0)));
    }

    /**
     * The integer sums at their limits: every code the largest, every activation of a group the same value whose
     * fixed-point integer m = 662667136 = 40 · 2^24 - 2^23 - 2^15 - 2^7 has the byte planes -128, -128, -128, 40 — the
     * most negative byte in three planes times the largest code in every column of a 128-column group. A kernel that
     * carried narrower partial sums too far would wrap here and nowhere in random data.
     */
    @ParameterizedTest(name = "{0}-bit")
    @CsvSource({"4", "8"})
    void theLargestIntegerSumsAreExact(int bits) {
        int rows = 35, cols = 256, group = 128;
        int[] q = new int[rows * cols];
        Arrays.fill(q, (1 << bits) - 1);
        var c = withCodes(bits, group, DType.BF16, rows, cols, q, new Random(bits), 0);
        float v = Math.scalb(662667136f, -29);
        assertThat((double) v * (1 << 29)).as("the activation is exact in fp32").isEqualTo(662667136.0);
        float[] x = new float[cols];
        Arrays.fill(x, v);
        Arrays.fill(x, group, cols, -v); // the second group negated: planes -128, -127, -127, -39
        float[] y = new float[rows];
        c.packed().matvec(x, 0, y, 0);
        for (int r = 0; r < rows; r++) assertDecodeRow(c, cols, r, x, 0, y[r], "row " + r);
    }

    /**
     * f16 scales below f16's smallest normal (6.1e-5), as an over-quantized group can have: the kernels widen them
     * exactly (the block rows with the CPU's conversion, the rows after the last block and the fp32 path in the
     * kernels' own scalar code), so prefill gives the dequantized weights' bits and decode its formula's.
     */
    @Test
    void subnormalF16ScalesWidenExactly() {
        int rows = 19, cols = 128, tokens = 4; // a block of 16 rows and three after it
        var rnd = new Random(7);
        int[] q = new int[rows * cols];
        for (int i = 0; i < q.length; i++) q[i] = rnd.nextInt(16);
        var c = withCodes(4, 32, DType.F16, rows, cols, q, rnd, 0, 2e-6);
        long subnormal = 0;
        for (float sc : c.scales()) if (sc != 0 && Math.abs(sc) < 0x1p-14f) subnormal++;
        assertThat(subnormal).as("scales below f16's smallest normal").isGreaterThan(c.scales().length / 2);
        float[] x = activations(tokens * cols, 8), y = new float[tokens * rows];
        c.packed().matmul(x, tokens, y);
        for (int t = 0; t < tokens; t++)
            for (int r = 0; r < rows; r++)
                assertThat(Float.floatToRawIntBits(y[t * rows + r])).as("prefill t=%d r=%d", t, r)
                        .isEqualTo(Float.floatToRawIntBits(reference(c.weights(), cols, r, x, t * cols)));
        float[] yv = new float[rows];
        c.packed().matvec(x, 0, yv, 0);
        for (int r = 0; r < rows; r++) assertDecodeRow(c, cols, r, x, 0, yv[r], "decode r=" + r);
    }

    @Test
    void theAffineKernelsLoadWhereTheCpuHasThem() {
        if (!NativeKernels.expectedHere()) return;
        String flags;
        try {
            flags = Files.readAllLines(java.nio.file.Path.of("/proc/cpuinfo")).stream().filter(l -> l.startsWith("flags")).findFirst().orElse("") + " ";
        } catch (IOException e) {
            throw new AssertionError(e);
        }
        // with AVX-512 the AVX-512 kernels are chosen, and their affine ones need this set; without, the AVX2 ones
        boolean cpu = flags.contains(" avx512f ")
                ? flags.contains(" avx512vbmi ") && flags.contains(" f16c ") && flags.contains(" avx512bw ") && flags.contains(" avx512_vnni ")
                        && flags.contains(" avx512dq ") && flags.contains(" fma ")
                : flags.contains(" avx2 ") && flags.contains(" fma ") && flags.contains(" f16c ");
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
