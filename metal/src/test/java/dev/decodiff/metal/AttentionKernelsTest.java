package dev.decodiff.metal;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The attention kernels (scores for many keys, the probability-weighted sum of values) give exactly the bits of
 * an independent scalar loop in the engine's order: per score 16 lane accumulators over the head dim, summed in
 * lane order, then the tail; per output element the rows added in order, one fused multiply-add each (the tail:
 * separately rounded products). Keys and values come from two arrays, as history and this step's chunk do.
 */
class AttentionKernelsTest {
    private static final int L = 16;

    static float referenceScore(float[] q, int qOff, float[] k, int kOff, int d) {
        int bound = d - d % L;
        float[] acc = new float[L];
        for (int c = 0; c < bound; c += L)
            for (int i = 0; i < L; i++) acc[i] = Math.fma(q[qOff + c + i], k[kOff + c + i], acc[i]);
        float s = 0f;
        for (int i = 0; i < L; i++) s += acc[i];
        for (int c = bound; c < d; c++) s += q[qOff + c] * k[kOff + c];
        return s;
    }

    @ParameterizedTest
    @CsvSource({"1,256", "3,256", "4,512", "13,256", "67,64", "9,48", "7,20", "5,5", "33,20", "48,256"})
    void scoresAndWeightedSumsMatchTheScalarOrder(int n, int d) {
        var rnd = new Random(n * 31L + d);
        int stride = 3 * d; // kv heads × head dim: rows of other heads lie between
        float[] hist = new float[(n + 2) * stride], chunk = new float[3 * stride], q = new float[2 * d + 5];
        for (int i = 0; i < hist.length; i++) hist[i] = (float) rnd.nextGaussian();
        for (int i = 0; i < chunk.length; i++) chunk[i] = (float) rnd.nextGaussian();
        for (int i = 0; i < q.length; i++) q[i] = (float) rnd.nextGaussian();
        float[][] rows = new float[n][];
        int[] off = new int[n];
        for (int i = 0; i < n; i++) {
            boolean fromChunk = i >= n - 2 && i >= 1; // the last rows come from this step's chunk
            rows[i] = fromChunk ? chunk : hist;
            off[i] = (fromChunk ? (i - (n - 2)) * stride : (i + 1) * stride) + d;
        }
        int qOff = 5;
        float[] scores = new float[n];
        VectorMath.dotsHeads(q, new int[]{qOff}, 1, rows, off, n, d, scores, n);
        for (int i = 0; i < n; i++) {
            int want = Float.floatToRawIntBits(referenceScore(q, qOff, rows[i], off[i], d));
            assertThat(Float.floatToRawIntBits(scores[i])).as("score %d", i).isEqualTo(want);
            assertThat(Float.floatToRawIntBits(VectorMath.dot(q, qOff, rows[i], off[i], d))).isEqualTo(want);
        }

        VectorMath.softmax(scores, 0, n);
        float[] out = new float[d + 7], viaAxpy = new float[d + 7], reference = new float[d + 7];
        int outOff = 7;
        VectorMath.weightedSumHeads(scores, n, 1, rows, off, n, d, out, new int[]{outOff});
        for (int i = 0; i < n; i++) VectorMath.axpy(scores[i], rows[i], off[i], viaAxpy, outOff, d);
        int bound = d - d % L;
        for (int e = 0; e < d; e++)
            for (int i = 0; i < n; i++) {
                float v = rows[i][off[i] + e];
                reference[outOff + e] = e < bound ? Math.fma(v, scores[i], reference[outOff + e]) : reference[outOff + e] + scores[i] * v;
            }
        for (int e = 0; e < out.length; e++) {
            assertThat(Float.floatToRawIntBits(out[e])).as("out[%d]", e).isEqualTo(Float.floatToRawIntBits(reference[e]));
            assertThat(Float.floatToRawIntBits(viaAxpy[e])).as("axpy out[%d]", e).isEqualTo(Float.floatToRawIntBits(reference[e]));
        }
    }

    @ParameterizedTest
    @CsvSource({"1,5,256", "2,3,256", "3,13,48", "4,67,512", "4,1,20", "2,9,40", "3,40,40", "1,32,256", "2,17,24"})
    void headGroupsGiveEachHeadsOwnBits(int heads, int n, int d) {
        var rnd = new Random(heads * 131L + n * 7L + d);
        int stride = 2 * d;
        float[] kv = new float[(n + 1) * stride], q = new float[5 * d + 3];
        for (int i = 0; i < kv.length; i++) kv[i] = (float) rnd.nextGaussian();
        for (int i = 0; i < q.length; i++) q[i] = (float) rnd.nextGaussian();
        float[][] rows = new float[n][];
        int[] off = new int[n];
        for (int i = 0; i < n; i++) {
            rows[i] = kv;
            off[i] = (i + 1) * stride + d;
        }
        int[] qOff = new int[VectorMath.HEADS];
        for (int h = 0; h < heads; h++) qOff[h] = 3 + (4 - h) * d; // heads in any order in q
        int cap = n + 2;
        float[] scores = new float[VectorMath.HEADS * cap];
        VectorMath.dotsHeads(q, qOff, heads, rows, off, n, d, scores, cap);
        for (int h = 0; h < heads; h++) {
            for (int i = 0; i < n; i++)
                assertThat(Float.floatToRawIntBits(scores[h * cap + i])).as("head %d key %d", h, i)
                        .isEqualTo(Float.floatToRawIntBits(referenceScore(q, qOff[h], rows[i], off[i], d)));
            VectorMath.softmax(scores, h * cap, n);
        }
        float[] out = new float[5 * d + 3], perHead = new float[5 * d + 3];
        VectorMath.weightedSumHeads(scores, cap, heads, rows, off, n, d, out, qOff);
        for (int h = 0; h < heads; h++)
            VectorMath.weightedSumHeads(java.util.Arrays.copyOfRange(scores, h * cap, h * cap + n), n, 1, rows, off, n, d, perHead, new int[]{qOff[h]});
        for (int e = 0; e < out.length; e++)
            assertThat(Float.floatToRawIntBits(out[e])).as("out[%d]", e).isEqualTo(Float.floatToRawIntBits(perHead[e]));
    }

    /**
     * The kernels for several query rows (a prefill's block of rows, each over its own causal or sliding run of keys,
     * the keys spanning several of the kernels' key blocks) give every row the bits of the scalar loop.
     */
    @ParameterizedTest
    @CsvSource({"4,16,150,64,0,0", "1,5,40,32,0,0", "3,20,200,256,0,0", "2,16,130,64,24,0", "4,9,70,32,7,0", "4,1,3,64,0,0",
            // a ring: the rows lie in one array at evenly spaced offsets that wrap back to its start inside a key block
            "4,16,150,64,0,37", "2,16,130,64,24,100", "3,7,90,32,0,89"})
    void rowsReadingRunsOfTheSameKeysGetEachRowsOwnBits(int heads, int rows, int keys, int d, int window, int ringStart) {
        var rnd = new Random(heads * 17L + rows * 5L + keys + d + window + ringStart);
        int stride = 2 * d;
        float[] kv = new float[(keys + 1) * stride], q = new float[rows * 4 * d + 3];
        for (int i = 0; i < kv.length; i++) kv[i] = (float) rnd.nextGaussian();
        for (int i = 0; i < q.length; i++) q[i] = (float) rnd.nextGaussian();
        float[][] kr = new float[keys][];
        int[] off = new int[keys];
        for (int i = 0; i < keys; i++) {
            kr[i] = kv;
            // rows anywhere in the array, or in a ring's slots from ringStart on
            off[i] = (ringStart == 0 ? keys - i : (i + ringStart) % keys) * stride + d % 3;
        }
        int[][] qOffs = new int[rows][VectorMath.HEADS];
        int[] from = new int[rows], count = new int[rows], base = new int[rows];
        int cap = keys;
        for (int r = 0; r < rows; r++) {
            int p = keys - rows + r; // the last rows of a causal step
            from[r] = window > 0 ? Math.max(0, p - window + 1) : 0;
            count[r] = p - from[r] + 1;
            base[r] = r * VectorMath.HEADS * cap;
            for (int h = 0; h < heads; h++) qOffs[r][h] = 3 + (r * 4 + (3 - h)) * d;
        }
        float[] scores = new float[rows * VectorMath.HEADS * cap];
        VectorMath.dotsHeadsRows(q, qOffs, heads, rows, kr, off, from, count, d, scores, base, cap);
        for (int r = 0; r < rows; r++)
            for (int h = 0; h < heads; h++) {
                for (int i = 0; i < count[r]; i++)
                    assertThat(Float.floatToRawIntBits(scores[base[r] + h * cap + i])).as("row %d head %d key %d", r, h, i)
                            .isEqualTo(Float.floatToRawIntBits(referenceScore(q, qOffs[r][h], kr[from[r] + i], off[from[r] + i], d)));
                VectorMath.softmax(scores, base[r] + h * cap, count[r]);
            }
        float[] out = new float[q.length], reference = new float[q.length];
        for (int i = 0; i < out.length; i++) out[i] = reference[i] = i % 5 == 0 ? 0f : (float) rnd.nextGaussian(); // adds to what is there
        VectorMath.weightedSumRows(scores, base, cap, heads, rows, kr, off, from, count, d, out, qOffs);
        for (int r = 0; r < rows; r++)
            for (int h = 0; h < heads; h++)
                for (int e = 0; e < d; e++)
                    for (int i = 0; i < count[r]; i++) {
                        int o = qOffs[r][h] + e;
                        reference[o] = Math.fma(kr[from[r] + i][off[from[r] + i] + e], scores[base[r] + h * cap + i], reference[o]);
                    }
        for (int e = 0; e < out.length; e++)
            assertThat(Float.floatToRawIntBits(out[e])).as("out[%d]", e).isEqualTo(Float.floatToRawIntBits(reference[e]));
    }

    /**
     * softmax gives the bits of its scalar definition: the maximum by Math.max in order, e^fl(x - max) by
     * {@link Transcendentals#exp(double)}, the sum in double in order, each element times fl(1 / sum) — with masked
     * (-inf) scores, signed zeros and lengths that are not a multiple of the vector.
     */
    @ParameterizedTest
    @CsvSource({"1", "5", "16", "17", "40", "333"})
    void softmaxGivesTheBitsOfItsScalarDefinition(int n) {
        var rnd = new Random(n);
        float[] x = new float[n + 3];
        for (int i = 0; i < x.length; i++)
            x[i] = switch (i % 7) {
                case 0 -> Float.NEGATIVE_INFINITY;
                case 1 -> -0.0f;
                case 2 -> 0.0f;
                default -> (float) (rnd.nextGaussian() * 8);
            };
        x[3 + n / 2] = 0.5f; // at least one finite score
        float[] want = x.clone();
        int off = 3;
        float max = Float.NEGATIVE_INFINITY;
        for (int i = 0; i < n; i++) max = Math.max(max, want[off + i]);
        for (int i = 0; i < n; i++) want[off + i] = (float) Transcendentals.exp(want[off + i] - max); // the difference in fp32, as the kernel takes it
        double sum = 0;
        for (int i = 0; i < n; i++) sum += want[off + i];
        float inv = (float) (1.0 / sum);
        for (int i = 0; i < n; i++) want[off + i] *= inv;
        VectorMath.softmax(x, off, n);
        for (int i = 0; i < x.length; i++)
            assertThat(Float.floatToRawIntBits(x[i])).as("x[%d]", i).isEqualTo(Float.floatToRawIntBits(want[i]));
    }

    /** Element e of packed rows decoded by the format's definition (bf16: the high half; q8_0: q·d; q4_0: (n − 8)·d). */
    private static float decoded(PackedRows rows, int e) {
        return switch (rows.format()) {
            case BF16 -> Float.intBitsToFloat((rows.halves()[e] & 0xffff) << 16);
            case Q8_0 -> rows.bytes()[e] * Float.float16ToFloat(rows.halves()[e / 32]);
            case Q4_0 -> {
                int b = rows.bytes()[e / 32 * 16 + e % 16] & 0xff, nibble = e % 32 < 16 ? b & 15 : b >>> 4;
                yield (nibble - 8) * Float.float16ToFloat(rows.halves()[e / 32]);
            }
        };
    }

    /**
     * Keys and values read packed (bf16, q8_0, q4_0 rows at ring-ordered slots, a head's slice of a wider row, this
     * step's f32 rows after them) give exactly the bits of the same kernels over the rows decoded to f32 first.
     */
    @ParameterizedTest
    @CsvSource({"BF16,4,40,1,256", "Q8_0,4,40,1,256", "Q4_0,4,40,1,256", "Q8_0,3,17,0,48", "Q4_0,2,5,3,48", "Q4_0,1,70,2,64",
            "BF16,2,9,2,20", "Q8_0,4,1,0,32", "Q4_0,4,0,4,32", "BF16,1,33,0,512"})
    void packedRowsGiveTheBitsOfTheirDecodedRows(PackedRows.Format format, int heads, int packedCount, int f32Count, int d) {
        var rnd = new Random(format.ordinal() * 1009L + heads * 31L + packedCount * 7L + d);
        int stride = 4 * d, slotsHeld = packedCount + 5, column = d, n = packedCount + f32Count;
        byte[] bytes = new byte[slotsHeld * stride];
        short[] halves = new short[format == PackedRows.Format.BF16 ? slotsHeld * stride : slotsHeld * stride / 32];
        rnd.nextBytes(bytes);
        for (int i = 0; i < halves.length; i++)
            halves[i] = format == PackedRows.Format.BF16 ? (short) (Float.floatToRawIntBits((float) rnd.nextGaussian()) >>> 16)
                    : Float.floatToFloat16((float) rnd.nextDouble() * 0.02f);
        var rows = new PackedRows(format, bytes, halves, stride);
        int[] slots = new int[n];
        for (int i = 0; i < packedCount; i++) slots[i] = (i * 3 + 2) % slotsHeld; // a ring: slots out of order
        float[] chunk = new float[Math.max(1, f32Count) * stride], decodedRows = new float[Math.max(1, packedCount) * d];
        for (int i = 0; i < chunk.length; i++) chunk[i] = (float) rnd.nextGaussian();
        float[][] f32Rows = new float[n][], packedOrF32 = new float[n][];
        int[] f32Off = new int[n], mixedOff = new int[n];
        for (int i = 0; i < n; i++) {
            if (i < packedCount) {
                for (int c = 0; c < d; c++) decodedRows[i * d + c] = decoded(rows, slots[i] * stride + column + c);
                f32Rows[i] = decodedRows;
                f32Off[i] = i * d;
            } else {
                f32Rows[i] = packedOrF32[i] = chunk;
                f32Off[i] = mixedOff[i] = (i - packedCount) * stride + column;
            }
        }
        var span = new PackedRows.Span(rows, slots, packedCount, column);
        float[] q = new float[5 * d];
        for (int i = 0; i < q.length; i++) q[i] = (float) rnd.nextGaussian();
        int[] qOff = {4 * d, 0, 2 * d, d};
        int cap = n + 3;
        float[] want = new float[VectorMath.HEADS * cap], got = new float[VectorMath.HEADS * cap];
        VectorMath.dotsHeads(q, qOff, heads, f32Rows, f32Off, n, d, want, cap);
        VectorMath.dotsHeads(q, qOff, heads, span, packedOrF32, mixedOff, n, d, got, cap);
        for (int i = 0; i < want.length; i++)
            assertThat(Float.floatToRawIntBits(got[i])).as("score %d", i).isEqualTo(Float.floatToRawIntBits(want[i]));

        for (int h = 0; h < heads; h++) VectorMath.softmax(want, h * cap, n);
        float[] outWant = new float[5 * d], outGot = new float[5 * d];
        VectorMath.weightedSumHeads(want, cap, heads, f32Rows, f32Off, n, d, outWant, qOff);
        VectorMath.weightedSumHeads(want, cap, heads, span, packedOrF32, mixedOff, n, d, outGot, qOff);
        for (int e = 0; e < outWant.length; e++)
            assertThat(Float.floatToRawIntBits(outGot[e])).as("out[%d]", e).isEqualTo(Float.floatToRawIntBits(outWant[e]));
        if (n > 0) assertThat(outWant).as("the sums are not all zero").isNotEqualTo(new float[5 * d]);
    }

    /**
     * Subnormal weights (softmax of far-off keys) are summed in the 2^32-scaled domain: exactly the scalar FMA loop run
     * on scaled weights and scaled back, nothing flushed, within a subnormal ulp of the unscaled loop; and values that
     * would overflow once scaled fall back to the unscaled loop, bit for bit.
     */
    @org.junit.jupiter.api.Test
    void subnormalWeightsAreKeptAndOverflowFallsBack() {
        int n = 70, d = 64, heads = 3;
        var rnd = new Random(3);
        float[] v = new float[n * d];
        for (int i = 0; i < v.length; i++) v[i] = (float) rnd.nextGaussian();
        float[] p = new float[heads * n];
        for (int i = 0; i < p.length; i++) p[i] = i % 3 == 0 ? Float.MIN_VALUE * (1 + rnd.nextInt(1 << 20)) : (i % 3 == 1 ? 0f : (float) rnd.nextDouble() * 1e-3f);
        float[][] rows = new float[n][];
        int[] off = new int[n];
        for (int i = 0; i < n; i++) {
            rows[i] = v;
            off[i] = i * d;
        }
        int[] outOff = {0, d, 2 * d};
        float[] out = new float[heads * d], outRows = new float[heads * d + d];
        VectorMath.weightedSumHeads(p, n, heads, rows, off, n, d, out, outOff);
        // the same row among others through the several-rows kernel (a second row over the later half of the values)
        int[][] rowOffs = {outOff, {heads * d, heads * d, heads * d, heads * d}};
        float[] p2 = new float[2 * heads * n];
        System.arraycopy(p, 0, p2, 0, heads * n);
        System.arraycopy(p, 0, p2, heads * n, n / 2);
        VectorMath.weightedSumRows(p2, new int[]{0, heads * n}, n, heads, 2, rows, off, new int[]{0, n - n / 2}, new int[]{n, n / 2}, d, outRows,
                rowOffs);
        assertThat(java.util.Arrays.copyOf(outRows, heads * d)).isEqualTo(out);
        for (int h = 0; h < heads; h++)
            for (int e = 0; e < d; e++) {
                float scaled = 0f, plain = 0f;
                for (int i = 0; i < n; i++) {
                    scaled = Math.fma(v[i * d + e], p[h * n + i] * 0x1p32f, scaled);
                    plain = Math.fma(v[i * d + e], p[h * n + i], plain);
                }
                assertThat(Float.floatToRawIntBits(out[h * d + e])).as("head %d col %d", h, e).isEqualTo(Float.floatToRawIntBits(scaled * 0x1p-32f));
                assertThat((double) Math.abs(out[h * d + e] - plain)).isLessThanOrEqualTo(Math.ulp(plain) + Float.MIN_VALUE);
            }

        float[] big = v.clone();
        big[5 * d + 7] = 3e38f; // × 2^32 overflows: the block is redone unscaled
        for (int i = 0; i < n; i++) rows[i] = big;
        float[] outBig = new float[heads * d], outBigRows = new float[heads * d];
        VectorMath.weightedSumHeads(p, n, heads, rows, off, n, d, outBig, outOff);
        VectorMath.weightedSumRows(p, new int[]{0}, n, heads, 1, rows, off, new int[]{0}, new int[]{n}, d, outBigRows, new int[][]{outOff});
        assertThat(outBigRows).isEqualTo(outBig);
        for (int h = 0; h < heads; h++)
            for (int e = 0; e < d; e++) {
                float plain = 0f;
                for (int i = 0; i < n; i++) plain = Math.fma(big[i * d + e], p[h * n + i], plain);
                assertThat(Float.floatToRawIntBits(outBig[h * d + e])).as("overflow fallback head %d col %d", h, e).isEqualTo(Float.floatToRawIntBits(plain));
            }
    }

    @org.junit.jupiter.api.Test
    void timesTwoToThe32IsTheExactProduct() {
        var rnd = new Random(9);
        float[] special = {0f, -0f, Float.MIN_VALUE, -Float.MIN_VALUE, 0x1p-127f, Float.MIN_NORMAL, 0x1.fffffep-127f, 1f, -3.5f,
                0x1p95f, 0x1p96f, Float.MAX_VALUE, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, Float.NaN};
        for (float x : special) assertThat(Float.floatToRawIntBits(VectorMath.times2p32(x))).as("%s", x).isEqualTo(Float.floatToRawIntBits(x * 0x1p32f));
        for (int i = 0; i < 100_000; i++) {
            float x = Float.intBitsToFloat(rnd.nextInt());
            assertThat(Float.floatToRawIntBits(VectorMath.times2p32(x))).as("%s", x).isEqualTo(Float.floatToRawIntBits(x * 0x1p32f));
        }
    }
}
