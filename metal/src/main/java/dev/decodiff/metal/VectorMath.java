package dev.decodiff.metal;

import jdk.incubator.vector.DoubleVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * Element-wise and reduction kernels over fp32 activations, with the rounding the reference uses. Transcendentals
 * come from {@link Transcendentals} (or StrictMath), so a result never depends on whether the JIT has compiled the caller.
 */
public final class VectorMath {
    private static final VectorSpecies<Float> F = FloatVector.SPECIES_512;
    private static final int L = F.length();
    /**
     * The width the kernels that run in Java here take: 512 bits where the CPU has them, else 256 (AVX2), where
     * 512-bit operations would run as Java loops over the lanes, tens of times slower. Lane-wise kernels take it as
     * is (the width changes no bit); the kernels with the contract's sixteen lanes take them E's length at a time,
     * each part its own accumulator over the same elements, summed in lane order: the same bits.
     */
    static final VectorSpecies<Float> E = FloatVector.SPECIES_PREFERRED.vectorBitSize() >= 512 ? FloatVector.SPECIES_512 : FloatVector.SPECIES_256;
    private static final int EL = E.length();
    /** meanSquare's eight double lanes as two halves of four, which every x86-64 vector unit with AVX runs. */
    private static final VectorSpecies<Float> F4 = FloatVector.SPECIES_128;
    private static final VectorSpecies<Double> D4 = DoubleVector.SPECIES_256;

    private VectorMath() {}

    /**
     * Sum of the lanes in a fixed order. reduceLanes(ADD) leaves the order open, and the interpreter and C2 do
     * pick different ones: results would then change while the JIT warms up, breaking bit-identical reruns.
     */
    public static float sumLanes(FloatVector v) {
        float s = 0f;
        for (int i = 0; i < v.length(); i++) s += v.lane(i);
        return s;
    }

    public static float dot(float[] a, int aOff, float[] b, int bOff, int n) {
        int bound = n - (n % L);
        float s = 0f;
        for (int part = 0; part < L; part += EL) { // lanes [part, part + EL) of the sixteen
            var acc = FloatVector.zero(E);
            for (int i = part; i < bound; i += L)
                acc = FloatVector.fromArray(E, a, aOff + i).fma(FloatVector.fromArray(E, b, bOff + i), acc);
            for (int lane = 0; lane < EL; lane++) s += acc.lane(lane);
        }
        for (int i = bound; i < n; i++) s += a[aOff + i] * b[bOff + i];
        return s;
    }

    /** The most query heads {@link #dotsHeads} and {@link #weightedSumHeads} take in one pass over the keys and values. */
    public static final int HEADS = 4;
    /** Value rows {@link #weightedSumHeads} takes per block (64 rows of a 512-wide head: 128 KB, in L2). */
    private static final int ROW_BLOCK = 64;

    /**
     * For up to {@link #HEADS} query heads that read the same keys (a GQA group): scores[h·stride + i] = q_h·k_i with
     * q_h = q[qOff[h] ..], each exactly {@link #dot}. Each key row is loaded once for all the heads (instead of once
     * per head), and the heads' FMA chains overlap.
     */
    public static void dotsHeads(float[] q, int[] qOff, int heads, float[][] keys, int[] keyOff, int n, int d, float[] scores, int stride) {
        dotsHeads(q, qOff, heads, null, keys, keyOff, n, d, scores, stride);
    }

    /**
     * {@link #dotsHeads} where keys [0, packed.count()) are read packed from {@code packed} (keys[i] of those rows is
     * not used) and the rest from keys/keyOff: the same bits as over the decoded rows.
     */
    public static void dotsHeads(float[] q, int[] qOff, int heads, PackedRows.Span packed, float[][] keys, int[] keyOff, int n, int d,
                                 float[] scores, int stride) {
        dotsRange(q, qOff, heads, packed, keys, keyOff, 0, n, d, scores, 0, stride);
    }

    /** Keys rows [k0, k0 + n) of keys/keyOff, scores at scores[s0 + h·stride + i] (packed rows only with k0 = 0). */
    private static void dotsRange(float[] q, int[] qOff, int heads, PackedRows.Span packed, float[][] keys, int[] keyOff, int k0, int n, int d,
                                  float[] scores, int s0, int stride) {
        if (heads < 1 || heads > HEADS) throw new IllegalArgumentException("heads must be 1.." + HEADS + ", is " + heads);
        if (packed != null && k0 != 0) throw new IllegalArgumentException("packed keys are read from the first row on");
        // Fewer than four heads: the spare chains repeat the last head (same bits), only the real ones are stored.
        int q0 = qOff[0], q1 = qOff[Math.min(1, heads - 1)], q2 = qOff[Math.min(2, heads - 1)], q3 = qOff[heads - 1];
        if (packed == null && NativeKernels.attentionAvailable() && n > 0) {
            // run by run of rows in one array (a decode step's keys: the cache's rows, then the step's own): each score
            // is its own sum, so the split changes no bit
            for (int i = k0, end = k0 + n; i < end; ) {
                int j = runEnd(keys, i, end);
                NativeKernels.attentionScores(q, q0, q1, q2, q3, heads, keys[i], keyOff, i, j - i, d, scores, s0 + i - k0, stride);
                i = j;
            }
            return;
        }
        int bound = d - (d % L), i = 0, np = packed == null ? 0 : packed.count();
        float[] lanes = new float[HEADS * L * L];
        // Sixteen keys at a time: their lane vectors stored, then each key's lanes summed in lane order, four keys'
        // sums interleaved (the same additions in the same order as the one-key loop below). A gather of lane j of all
        // sixteen keys per step did the same in vectors at 2.3 x the time: gathers are slow on some cores (Zen 4).
        for (; i + L <= n; i += L) {
            for (int j = 0; j < L; ) {
                if (i + j >= np && j + 4 <= L) {
                    dotLanes4x4(q, q0, q1, q2, q3, keys, keyOff, k0 + i + j, bound, lanes, j * L, L * L);
                    j += 4;
                } else {
                    if (i + j < np) dotLanes4(q, q0, q1, q2, q3, null, packed.element(i + j), packed.rows(), bound, lanes, j * L, L * L);
                    else dotLanes4(q, q0, q1, q2, q3, keys[k0 + i + j], keyOff[k0 + i + j], null, bound, lanes, j * L, L * L);
                    j++;
                }
            }
            for (int h = 0; h < heads; h++) laneSums16(lanes, h * L * L, scores, s0 + h * stride + i);
            for (int c = bound; c < d; c++) {
                for (int j = 0; j < L; j++) {
                    float kc = element(packed, keys, keyOff, k0 + i + j, c);
                    scores[s0 + i + j] += q[q0 + c] * kc;
                    if (heads > 1) scores[s0 + stride + i + j] += q[q1 + c] * kc;
                    if (heads > 2) scores[s0 + 2 * stride + i + j] += q[q2 + c] * kc;
                    if (heads > 3) scores[s0 + 3 * stride + i + j] += q[q3 + c] * kc;
                }
            }
        }
        for (; i < n; i++) {
            if (i < np) dotLanes4(q, q0, q1, q2, q3, null, packed.element(i), packed.rows(), bound, lanes, 0, L);
            else dotLanes4(q, q0, q1, q2, q3, keys[k0 + i], keyOff[k0 + i], null, bound, lanes, 0, L);
            float a0 = 0f, a1 = 0f, a2 = 0f, a3 = 0f;
            for (int j = 0; j < L; j++) {
                a0 += lanes[j];
                a1 += lanes[L + j];
                a2 += lanes[2 * L + j];
                a3 += lanes[3 * L + j];
            }
            for (int c = bound; c < d; c++) {
                float kc = element(packed, keys, keyOff, k0 + i, c);
                a0 += q[q0 + c] * kc;
                a1 += q[q1 + c] * kc;
                a2 += q[q2 + c] * kc;
                a3 += q[q3 + c] * kc;
            }
            scores[s0 + i] = a0;
            if (heads > 1) scores[s0 + stride + i] = a1;
            if (heads > 2) scores[s0 + 2 * stride + i] = a2;
            if (heads > 3) scores[s0 + 3 * stride + i] = a3;
        }
    }

    /**
     * out[at + j] = the sum of lanes[from + 16j ..+16) in lane order (from 0), j < 16: sixteen keys' lane vectors, four
     * keys' sums at a time in independent chains.
     */
    private static void laneSums16(float[] lanes, int from, float[] out, int at) {
        for (int j = 0; j < L; j += 4) {
            int o0 = from + j * L, o1 = o0 + L, o2 = o1 + L, o3 = o2 + L;
            float s0 = 0f, s1 = 0f, s2 = 0f, s3 = 0f;
            for (int l = 0; l < L; l++) {
                s0 += lanes[o0 + l];
                s1 += lanes[o1 + l];
                s2 += lanes[o2 + l];
                s3 += lanes[o3 + l];
            }
            out[at + j] = s0;
            out[at + j + 1] = s1;
            out[at + j + 2] = s2;
            out[at + j + 3] = s3;
        }
    }

    /**
     * Key rows {@link #dotsHeadsRows} and {@link #weightedSumRows} take per block: 64 rows of a 512-wide head are
     * 128 KB, which stays in L2 while every query row of the call reads it.
     */
    private static final int KEY_BLOCK = 64;
    /** {@link #weightedSumRows}'s scaled weights and saved outputs, one buffer per thread (a block of a long prompt's rows: megabytes). */
    private static final ThreadLocal<float[]> SCALED_WEIGHTS = ThreadLocal.withInitial(() -> new float[0]);

    /**
     * {@link #dotsHeads} for several query rows (a prefill's) that read runs of the same keys: row r's heads at
     * qOffs[r], its keys rows [from[r], from[r] + count[r]) of keys/keyOff, its scores at
     * scores[base[r] + h·stride + i] for its i-th key. The keys are visited in blocks that stay in L2 while every row
     * reads them, where a row at a time re-read all of a long prompt's keys (past the L2) for each row. Each score is
     * the same dot product in the same order: the bits of {@link #dotsHeads} row by row.
     */
    public static void dotsHeadsRows(float[] q, int[][] qOffs, int heads, int rows, float[][] keys, int[] keyOff, int[] from, int[] count, int d,
                                     float[] scores, int[] base, int stride) {
        int most = 0;
        for (int r = 0; r < rows; r++) most = Math.max(most, count[r]);
        // Block m of each row is its keys [64m, 64m + 64): whole sixteens for the kernel, and the rows' blocks m overlap
        // (a task's rows start within a few keys of each other), so block m's keys come into L2 once for all the rows.
        for (int k = 0; k < most; k += KEY_BLOCK) {
            for (int r = 0; r < rows; r++) {
                int n = Math.min(KEY_BLOCK, count[r] - k);
                if (n > 0) dotsRange(q, qOffs[r], heads, null, keys, keyOff, from[r] + k, n, d, scores, base[r] + k, stride);
            }
        }
    }

    /**
     * {@link #weightedSumHeads} for several query rows: row r's weights at p[base[r] + h·stride + i] for its i-th value,
     * its values rows [from[r], from[r] + count[r]) of values/valueOff, its outputs at out[outOffs[r][h] ..]. The values
     * are visited in blocks that stay in L2 while every row reads them; each output is the same sum in the same order,
     * scaled alike, so the bits are {@link #weightedSumHeads}'s row by row. Head dims a multiple of 32 only.
     */
    public static void weightedSumRows(float[] p, int[] base, int stride, int heads, int rows, float[][] values, int[] valueOff, int[] from,
                                       int[] count, int d, float[] out, int[][] outOffs) {
        if (heads < 1 || heads > HEADS) throw new IllegalArgumentException("heads must be 1.." + HEADS + ", is " + heads);
        if (d % (2 * L) != 0) throw new IllegalArgumentException("head dim " + d + " is not a multiple of " + 2 * L);
        int h1 = Math.min(1, heads - 1), h2 = Math.min(2, heads - 1), h3 = heads - 1;
        int[][] real = new int[rows][];
        int[] at = new int[rows];
        int most = 0, total = 0;
        for (int r = 0; r < rows; r++) {
            total += Math.max(0, count[r]) * heads;
            most = Math.max(most, count[r]);
        }
        // one per-thread buffer: the scaled weights, then (from index total) each row's outputs as they were
        float[] scaled = SCALED_WEIGHTS.get();
        if (scaled.length < total + rows * heads * d) SCALED_WEIGHTS.set(scaled = new float[total + rows * heads * d]);
        float[] saved = scaled;
        int savedAt = total;
        for (int r = 0, next = 0; r < rows; r++) {
            int n = count[r];
            real[r] = java.util.Arrays.copyOf(outOffs[r], heads);
            if (n <= 0) continue;
            for (int h = 0; h < heads; h++) System.arraycopy(out, real[r][h], saved, savedAt + (r * heads + h) * d, d);
            at[r] = next;
            for (int h = 0; h < heads; h++)
                for (int i = 0; i < n; i++) scaled[next + h * n + i] = times2p32(p[base[r] + h * stride + i]);
            next += heads * n;
            scaleRows(out, real[r], d, SCALE);
        }
        for (int k = 0; k < most; k += KEY_BLOCK) { // block m of each row: its values [64m, 64m + 64), as for the scores
            for (int r = 0; r < rows; r++) {
                int n = count[r], f = from[r], a = f + k, b = f + Math.min(n, k + KEY_BLOCK);
                if (a >= b) continue;
                accumulateF32(scaled, at[r] - f, at[r] + h1 * n - f, at[r] + h2 * n - f, at[r] + h3 * n - f, values, valueOff, a, b, d, out,
                        outOffs[r][0], outOffs[r][h1], outOffs[r][h2], outOffs[r][h3]);
            }
        }
        for (int r = 0; r < rows; r++) {
            if (count[r] <= 0 || scaleRows(out, real[r], d, 1f / SCALE)) continue;
            for (int h = 0; h < heads; h++) System.arraycopy(saved, savedAt + (r * heads + h) * d, out, real[r][h], d);
            int b0 = base[r] - from[r];
            accumulate(p, b0, b0 + h1 * stride, b0 + h2 * stride, b0 + h3 * stride, null, values, valueOff, from[r], from[r] + count[r], d, out,
                    outOffs[r][0], outOffs[r][h1], outOffs[r][h2], outOffs[r][h3]);
        }
    }

    /**
     * The vector part of four dot products with one key row, left as lane vectors in lanes[at + h·headStride ..]. A method of its own
     * (and {@link #accumulateRows} too): small enough that C2 always compiles its Vector API calls to instructions;
     * inside one large method it sometimes did not, and the kernel ran ten times slower.
     */
    private static void dotLanes4(float[] q, int q0, int q1, int q2, int q3, float[] k, int ko, PackedRows packed, int bound, float[] lanes, int at,
                                  int headStride) {
        for (int part = 0; part < L; part += EL) { // lanes [part, part + EL) of the sixteen
            var a0 = FloatVector.zero(E);
            var a1 = a0;
            var a2 = a0;
            var a3 = a0;
            for (int c = part; c < bound; c += L) {
                // packed is fixed for the call, so the JIT splits the loop in two; neither pays for the test.
                var kv = packed == null ? FloatVector.fromArray(E, k, ko + c) : packed.load(ko + c);
                a0 = FloatVector.fromArray(E, q, q0 + c).fma(kv, a0);
                a1 = FloatVector.fromArray(E, q, q1 + c).fma(kv, a1);
                a2 = FloatVector.fromArray(E, q, q2 + c).fma(kv, a2);
                a3 = FloatVector.fromArray(E, q, q3 + c).fma(kv, a3);
            }
            a0.intoArray(lanes, at + part);
            a1.intoArray(lanes, at + headStride + part);
            a2.intoArray(lanes, at + 2 * headStride + part);
            a3.intoArray(lanes, at + 3 * headStride + part);
        }
    }

    /**
     * {@link #dotLanes4} for four f32 key rows at once (keys[k] .. keys[k + 3]), key m's lanes at lanes[at + m·16 ..]: each
     * query and key vector is loaded once for four products instead of once per product, and every accumulator adds
     * the same products in the same order (the same bits).
     */
    private static void dotLanes4x4(float[] q, int q0, int q1, int q2, int q3, float[][] keys, int[] keyOff, int k, int bound, float[] lanes, int at,
                                    int headStride) {
        float[] r0 = keys[k], r1 = keys[k + 1], r2 = keys[k + 2], r3 = keys[k + 3];
        int o0 = keyOff[k], o1 = keyOff[k + 1], o2 = keyOff[k + 2], o3 = keyOff[k + 3];
        var z = FloatVector.zero(F);
        FloatVector a00 = z, a01 = z, a02 = z, a03 = z, a10 = z, a11 = z, a12 = z, a13 = z;
        FloatVector a20 = z, a21 = z, a22 = z, a23 = z, a30 = z, a31 = z, a32 = z, a33 = z;
        for (int c = 0; c < bound; c += L) {
            var v0 = FloatVector.fromArray(F, r0, o0 + c);
            var v1 = FloatVector.fromArray(F, r1, o1 + c);
            var v2 = FloatVector.fromArray(F, r2, o2 + c);
            var v3 = FloatVector.fromArray(F, r3, o3 + c);
            var x = FloatVector.fromArray(F, q, q0 + c);
            a00 = x.fma(v0, a00);
            a01 = x.fma(v1, a01);
            a02 = x.fma(v2, a02);
            a03 = x.fma(v3, a03);
            x = FloatVector.fromArray(F, q, q1 + c);
            a10 = x.fma(v0, a10);
            a11 = x.fma(v1, a11);
            a12 = x.fma(v2, a12);
            a13 = x.fma(v3, a13);
            x = FloatVector.fromArray(F, q, q2 + c);
            a20 = x.fma(v0, a20);
            a21 = x.fma(v1, a21);
            a22 = x.fma(v2, a22);
            a23 = x.fma(v3, a23);
            x = FloatVector.fromArray(F, q, q3 + c);
            a30 = x.fma(v0, a30);
            a31 = x.fma(v1, a31);
            a32 = x.fma(v2, a32);
            a33 = x.fma(v3, a33);
        }
        a00.intoArray(lanes, at);
        a01.intoArray(lanes, at + L);
        a02.intoArray(lanes, at + 2 * L);
        a03.intoArray(lanes, at + 3 * L);
        a10.intoArray(lanes, at + headStride);
        a11.intoArray(lanes, at + headStride + L);
        a12.intoArray(lanes, at + headStride + 2 * L);
        a13.intoArray(lanes, at + headStride + 3 * L);
        a20.intoArray(lanes, at + 2 * headStride);
        a21.intoArray(lanes, at + 2 * headStride + L);
        a22.intoArray(lanes, at + 2 * headStride + 2 * L);
        a23.intoArray(lanes, at + 2 * headStride + 3 * L);
        a30.intoArray(lanes, at + 3 * headStride);
        a31.intoArray(lanes, at + 3 * headStride + L);
        a32.intoArray(lanes, at + 3 * headStride + 2 * L);
        a33.intoArray(lanes, at + 3 * headStride + 3 * L);
    }

    /**
     * For up to {@link #HEADS} heads reading the same values: out[outOff[h] + e] += Σ_i p[h·stride + i]·v_i[e] over
     * i < n in order, each exactly n calls of {@link #axpy} in order: every value vector is loaded once for all the heads, and
     * each head's output block stays in registers across the rows.
     */
    public static void weightedSumHeads(float[] p, int stride, int heads, float[][] values, int[] valueOff, int n, int d, float[] out, int[] outOff) {
        weightedSumHeads(p, stride, heads, null, values, valueOff, n, d, out, outOff);
    }

    /**
     * {@link #weightedSumHeads} where values [0, packed.count()) are read packed from {@code packed} (values[i] of those
     * rows is not used) and the rest from values/valueOff: the same bits as over the decoded rows.
     */
    public static void weightedSumHeads(float[] p, int stride, int heads, PackedRows.Span packed, float[][] values, int[] valueOff, int n, int d,
                                        float[] out, int[] outOff) {
        if (heads < 1 || heads > HEADS) throw new IllegalArgumentException("heads must be 1.." + HEADS + ", is " + heads);
        // Spare heads repeat the last one: they compute and store the same bits to the same place.
        int h1 = Math.min(1, heads - 1), h2 = Math.min(2, heads - 1), h3 = heads - 1;
        int p0 = 0, p1 = h1 * stride, p2 = h2 * stride, p3 = h3 * stride;
        int u0 = outOff[0], u1 = outOff[h1], u2 = outOff[h2], u3 = outOff[h3];
        int bound = d - (d % L), c2 = bound - bound % (2 * L);
        int[] real = java.util.Arrays.copyOf(outOff, heads); // each real head once (spares repeat one)
        if (c2 > 0) {
            // Softmax weights of far-off keys are often subnormal, and every FMA with a subnormal operand takes a
            // microcode assist (~100 cycles): decode at a long context spent most of its attention time there. So the
            // sums run scaled by 2^32, where those weights are normal numbers, and are scaled back at the end. Scaling
            // by a power of two commutes with rounding wherever the unscaled values are normal, so the result is the
            // plain one except where the plain one would have rounded a partial sum on the subnormal grid (here it is
            // kept to full precision: nothing is flushed). Should anything overflow in the scaled domain, the block
            // is redone unscaled.
            float[] saved = new float[heads * c2];
            for (int h = 0; h < heads; h++) System.arraycopy(out, real[h], saved, h * c2, c2);
            float[] scaled = new float[heads * n];
            for (int h = 0; h < heads; h++)
                for (int i = 0; i < n; i++) scaled[h * n + i] = times2p32(p[h * stride + i]);
            scaleRows(out, real, c2, SCALE);
            accumulate(scaled, 0, h1 * n, h2 * n, h3 * n, packed, values, valueOff, 0, n, c2, out, u0, u1, u2, u3);
            if (!scaleRows(out, real, c2, 1f / SCALE)) {
                for (int h = 0; h < heads; h++) System.arraycopy(saved, h * c2, out, real[h], c2);
                accumulate(p, p0, p1, p2, p3, packed, values, valueOff, 0, n, c2, out, u0, u1, u2, u3);
            }
        }
        for (int h = 0; h < heads; h++) {
            int ph = h * stride, uh = real[h];
            for (int e = c2; e < bound; e += EL) {
                var o = FloatVector.fromArray(E, out, uh + e);
                for (int i = 0; i < n; i++) o = vector(packed, values, valueOff, i, e).fma(FloatVector.broadcast(E, p[ph + i]), o);
                o.intoArray(out, uh + e);
            }
            for (int e = bound; e < d; e++) {
                float s = out[uh + e];
                for (int i = 0; i < n; i++) s += p[ph + i] * element(packed, values, valueOff, i, e);
                out[uh + e] = s;
            }
        }
    }

    /** Power of two by which {@link #weightedSumHeads} scales its sums: 2^-149 · 2^32 is a normal float. */
    private static final float SCALE = 0x1p32f;

    /**
     * x · 2^32 without a floating-point operation on a subnormal (each would cost an assist): subnormals through their
     * integer significand, normal numbers by their exponent field; overflow and NaN as the multiply gives them.
     */
    static float times2p32(float x) {
        int bits = Float.floatToRawIntBits(x), mag = bits & 0x7fffffff;
        if (mag == 0) return x;
        if (mag < 0x00800000) {
            float m = (float) mag * 0x1p-117f; // mag · 2^-149 · 2^32, exact: mag < 2^23
            return bits < 0 ? -m : m;
        }
        if (mag >= (0xff - 32) << 23) return x * SCALE;
        return Float.intBitsToFloat(bits + (32 << 23));
    }

    /** Column c of row i: packed for i below the span's count, else from rows/off. */
    private static float element(PackedRows.Span packed, float[][] rows, int[] off, int i, int c) {
        return packed != null && i < packed.count() ? packed.rows().get(packed.element(i) + c) : rows[i][off[i] + c];
    }

    /** Columns [c, c + E's length) of row i, as {@link #element}. */
    private static FloatVector vector(PackedRows.Span packed, float[][] rows, int[] off, int i, int c) {
        return packed != null && i < packed.count() ? packed.rows().load(packed.element(i) + c) : FloatVector.fromArray(E, rows[i], off[i] + c);
    }

    /** Columns [0, c2) of the heads' outputs, rows [lo, hi) in order (packed rows only from 0). */
    private static void accumulate(float[] p, int p0, int p1, int p2, int p3, PackedRows.Span packed, float[][] values, int[] valueOff, int lo, int hi,
                                   int c2, float[] out, int u0, int u1, int u2, int u3) {
        int np = packed == null ? 0 : packed.count();
        // Rows in blocks that stay in L2 while every column block passes over them: a column block touches only two
        // cache lines of each row, and walking all n rows for each one would stride through memory d/32 times.
        for (int i0 = lo; i0 < hi; i0 += ROW_BLOCK) {
            int i1 = Math.min(hi, i0 + ROW_BLOCK);
            int split = Math.clamp(np, i0, i1); // packed rows first: the rows stay in order
            for (int c = 0; c < c2; c += 2 * L)
                if (split > i0) accumulateRows(p, p0, p1, p2, p3, packed, values, valueOff, i0, split, c, out, u0, u1, u2, u3);
            if (split < i1) accumulateF32(p, p0, p1, p2, p3, values, valueOff, split, i1, c2, out, u0, u1, u2, u3);
        }
    }

    /** out[o + e] *= factor for each o in offsets, e < n; false if a result is not finite. */
    private static boolean scaleRows(float[] out, int[] offsets, int n, float factor) {
        boolean finite = true;
        for (int o : offsets) {
            for (int e = 0; e < n; e++) {
                float v = out[o + e] * factor;
                out[o + e] = v;
                finite &= Float.isFinite(v);
            }
        }
        return finite;
    }

    /**
     * Columns [0, c2) of four heads' outputs += their weights · f32 value rows [i0, i1), in row order: 64 columns a
     * pass where they fit (each weight broadcast once for sixteen multiply-adds instead of eight), then 32.
     */
    private static void accumulateF32(float[] p, int p0, int p1, int p2, int p3, float[][] values, int[] valueOff, int i0, int i1, int c2,
                                      float[] out, int u0, int u1, int u2, int u3) {
        if (NativeKernels.attentionAvailable() && i1 > i0) {
            // run by run of rows in one array, in row order: each output element still adds the rows in order
            for (int i = i0; i < i1; ) {
                int j = runEnd(values, i, i1);
                NativeKernels.attentionValues(p, p0, p1, p2, p3, values[i], valueOff, i, j, c2, out, u0, u1, u2, u3);
                i = j;
            }
            return;
        }
        int c = 0;
        for (; c + 4 * L <= c2; c += 4 * L) accumulateRows64(p, p0, p1, p2, p3, values, valueOff, i0, i1, c, out, u0, u1, u2, u3);
        for (; c < c2; c += 2 * L) accumulateRows(p, p0, p1, p2, p3, null, values, valueOff, i0, i1, c, out, u0, u1, u2, u3);
    }

    /** The end of the run of rows from i (before end) that lie in rows[i]'s array, as the native attention loops take them. */
    private static int runEnd(float[][] rows, int i, int end) {
        float[] a = rows[i];
        int j = i + 1;
        while (j < end && rows[j] == a) j++;
        return j;
    }

    /** Columns [c, c+64) of four heads' outputs += their weights · f32 value rows [i0, i1), in row order. */
    private static void accumulateRows64(float[] p, int p0, int p1, int p2, int p3, float[][] values, int[] valueOff, int i0, int i1, int c,
                                         float[] out, int u0, int u1, int u2, int u3) {
        var o00 = FloatVector.fromArray(F, out, u0 + c);
        var o01 = FloatVector.fromArray(F, out, u0 + c + L);
        var o02 = FloatVector.fromArray(F, out, u0 + c + 2 * L);
        var o03 = FloatVector.fromArray(F, out, u0 + c + 3 * L);
        var o10 = FloatVector.fromArray(F, out, u1 + c);
        var o11 = FloatVector.fromArray(F, out, u1 + c + L);
        var o12 = FloatVector.fromArray(F, out, u1 + c + 2 * L);
        var o13 = FloatVector.fromArray(F, out, u1 + c + 3 * L);
        var o20 = FloatVector.fromArray(F, out, u2 + c);
        var o21 = FloatVector.fromArray(F, out, u2 + c + L);
        var o22 = FloatVector.fromArray(F, out, u2 + c + 2 * L);
        var o23 = FloatVector.fromArray(F, out, u2 + c + 3 * L);
        var o30 = FloatVector.fromArray(F, out, u3 + c);
        var o31 = FloatVector.fromArray(F, out, u3 + c + L);
        var o32 = FloatVector.fromArray(F, out, u3 + c + 2 * L);
        var o33 = FloatVector.fromArray(F, out, u3 + c + 3 * L);
        for (int i = i0; i < i1; i++) {
            float[] row = values[i];
            int e = valueOff[i] + c;
            var v0 = FloatVector.fromArray(F, row, e);
            var v1 = FloatVector.fromArray(F, row, e + L);
            var v2 = FloatVector.fromArray(F, row, e + 2 * L);
            var v3 = FloatVector.fromArray(F, row, e + 3 * L);
            var b = FloatVector.broadcast(F, p[p0 + i]);
            o00 = v0.fma(b, o00);
            o01 = v1.fma(b, o01);
            o02 = v2.fma(b, o02);
            o03 = v3.fma(b, o03);
            b = FloatVector.broadcast(F, p[p1 + i]);
            o10 = v0.fma(b, o10);
            o11 = v1.fma(b, o11);
            o12 = v2.fma(b, o12);
            o13 = v3.fma(b, o13);
            b = FloatVector.broadcast(F, p[p2 + i]);
            o20 = v0.fma(b, o20);
            o21 = v1.fma(b, o21);
            o22 = v2.fma(b, o22);
            o23 = v3.fma(b, o23);
            b = FloatVector.broadcast(F, p[p3 + i]);
            o30 = v0.fma(b, o30);
            o31 = v1.fma(b, o31);
            o32 = v2.fma(b, o32);
            o33 = v3.fma(b, o33);
        }
        o00.intoArray(out, u0 + c);
        o01.intoArray(out, u0 + c + L);
        o02.intoArray(out, u0 + c + 2 * L);
        o03.intoArray(out, u0 + c + 3 * L);
        o10.intoArray(out, u1 + c);
        o11.intoArray(out, u1 + c + L);
        o12.intoArray(out, u1 + c + 2 * L);
        o13.intoArray(out, u1 + c + 3 * L);
        o20.intoArray(out, u2 + c);
        o21.intoArray(out, u2 + c + L);
        o22.intoArray(out, u2 + c + 2 * L);
        o23.intoArray(out, u2 + c + 3 * L);
        o30.intoArray(out, u3 + c);
        o31.intoArray(out, u3 + c + L);
        o32.intoArray(out, u3 + c + 2 * L);
        o33.intoArray(out, u3 + c + 3 * L);
    }

    /** Columns [c, c+32) of four heads' outputs += their weights · value rows [i0, i1), in row order. */
    private static void accumulateRows(float[] p, int p0, int p1, int p2, int p3, PackedRows.Span packed, float[][] values, int[] valueOff,
                                       int i0, int i1, int c, float[] out, int u0, int u1, int u2, int u3) {
        for (int cc = c; cc < c + 2 * L; cc += 2 * EL) { // columns [cc, cc + 2·EL): all 32 at once where E has 16 lanes
            var o00 = FloatVector.fromArray(E, out, u0 + cc);
            var o01 = FloatVector.fromArray(E, out, u0 + cc + EL);
            var o10 = FloatVector.fromArray(E, out, u1 + cc);
            var o11 = FloatVector.fromArray(E, out, u1 + cc + EL);
            var o20 = FloatVector.fromArray(E, out, u2 + cc);
            var o21 = FloatVector.fromArray(E, out, u2 + cc + EL);
            var o30 = FloatVector.fromArray(E, out, u3 + cc);
            var o31 = FloatVector.fromArray(E, out, u3 + cc + EL);
            for (int i = i0; i < i1; i++) {
                // Rows [i0, i1) are all packed or all f32 (packed is fixed for the call: the JIT splits the loop in two).
                FloatVector v0, v1;
                if (packed == null) {
                    v0 = FloatVector.fromArray(E, values[i], valueOff[i] + cc);
                    v1 = FloatVector.fromArray(E, values[i], valueOff[i] + cc + EL);
                } else {
                    int e = packed.element(i) + cc;
                    v0 = packed.rows().load(e);
                    v1 = packed.rows().load(e + EL);
                }
                var b = FloatVector.broadcast(E, p[p0 + i]);
                o00 = v0.fma(b, o00);
                o01 = v1.fma(b, o01);
                b = FloatVector.broadcast(E, p[p1 + i]);
                o10 = v0.fma(b, o10);
                o11 = v1.fma(b, o11);
                b = FloatVector.broadcast(E, p[p2 + i]);
                o20 = v0.fma(b, o20);
                o21 = v1.fma(b, o21);
                b = FloatVector.broadcast(E, p[p3 + i]);
                o30 = v0.fma(b, o30);
                o31 = v1.fma(b, o31);
            }
            o00.intoArray(out, u0 + cc);
            o01.intoArray(out, u0 + cc + EL);
            o10.intoArray(out, u1 + cc);
            o11.intoArray(out, u1 + cc + EL);
            o20.intoArray(out, u2 + cc);
            o21.intoArray(out, u2 + cc + EL);
            o30.intoArray(out, u3 + cc);
            o31.intoArray(out, u3 + cc + EL);
        }
    }

    /** y += a·x over n elements. */
    public static void axpy(float a, float[] x, int xOff, float[] y, int yOff, int n) {
        var va = FloatVector.broadcast(E, a);
        int i = 0;
        for (int bound = n - (n % EL); i < bound; i += EL)
            FloatVector.fromArray(E, x, xOff + i).fma(va, FloatVector.fromArray(E, y, yOff + i)).intoArray(y, yOff + i);
        for (; i < n; i++) y[yOff + i] += a * x[xOff + i];
    }

    /**
     * Mean of squares in double: each square is exact there, eight lanes of sums added in lane order at the end (the
     * reference's reduction order differs from any loop by ~1e-7 anyway; the double sums differ from one order to
     * another by ~1e-13, far below the fp32 result's rounding).
     */
    public static double meanSquare(float[] x, int off, int n) {
        var lo = DoubleVector.zero(D4); // lanes 0-3 of the eight: elements i .. i+3 of each eight
        var hi = DoubleVector.zero(D4); // lanes 4-7
        int i = 0;
        for (int bound = n - n % 8; i < bound; i += 8) {
            var v = (DoubleVector) FloatVector.fromArray(F4, x, off + i).convertShape(VectorOperators.F2D, D4, 0);
            var w = (DoubleVector) FloatVector.fromArray(F4, x, off + i + 4).convertShape(VectorOperators.F2D, D4, 0);
            lo = v.fma(v, lo);
            hi = w.fma(w, hi);
        }
        double s = 0;
        for (int lane = 0; lane < 4; lane++) s += lo.lane(lane);
        for (int lane = 0; lane < 4; lane++) s += hi.lane(lane);
        for (; i < n; i++) {
            double v = x[off + i];
            s += v * v;
        }
        return s / n;
    }

    /**
     * RMSNorm as Gemma 4 defines it: x·(mean(x²)+eps)^(−1/2), then ·w when a weight is given (w as is, not 1+w).
     * out may alias x.
     */
    public static void rmsNorm(float[] x, int off, int n, float[] w, float eps, float[] out, int outOff) {
        float ms = (float) meanSquare(x, off, n);
        float inv = (float) StrictMath.pow(ms + eps, -0.5);
        int i = 0;
        if (w == null) {
            for (int bound = n - n % EL; i < bound; i += EL) FloatVector.fromArray(E, x, off + i).mul(inv).intoArray(out, outOff + i);
            for (; i < n; i++) out[outOff + i] = x[off + i] * inv;
        } else {
            for (int bound = n - n % EL; i < bound; i += EL)
                FloatVector.fromArray(E, x, off + i).mul(inv).mul(FloatVector.fromArray(E, w, i)).intoArray(out, outOff + i);
            for (; i < n; i++) out[outOff + i] = (x[off + i] * inv) * w[i];
        }
    }

    /** SiLU, x·sigmoid(x) = x / (1 + e^(−x)), in fp32 (the SwiGLU activation of Qwen3.5's and the Llama family's MLPs), see {@link Transcendentals#silu(float)}. */
    public static float silu(float x) { return Transcendentals.silu(x); }

    /** gelu_pytorch_tanh: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), see {@link Transcendentals#geluTanh}. */
    public static float geluTanh(float x) {
        return Transcendentals.geluTanh(x);
    }

    /** In-place softmax of x[off..off+n), max-subtracted, fp32 result. */
    public static void softmax(float[] x, int off, int n) {
        // The maximum in lanes first: max is exact and order-free (Math.max's NaN and signed zeros, lane by lane too).
        var m = FloatVector.broadcast(E, Float.NEGATIVE_INFINITY);
        int i = 0;
        for (int bound = n - n % EL; i < bound; i += EL) m = m.lanewise(VectorOperators.MAX, FloatVector.fromArray(E, x, off + i));
        float max = Float.NEGATIVE_INFINITY;
        for (int lane = 0; lane < EL; lane++) max = Math.max(max, m.lane(lane));
        for (; i < n; i++) max = Math.max(max, x[off + i]);
        Transcendentals.expShifted(x, off, n, max);
        double sum = 0;
        for (i = 0; i < n; i++) sum += x[off + i];
        scale(x, off, n, (float) (1.0 / sum));
    }

    public static void scale(float[] x, int off, int n, float s) {
        int i = 0;
        for (int bound = n - n % EL; i < bound; i += EL) FloatVector.fromArray(E, x, off + i).mul(s).intoArray(x, off + i);
        for (; i < n; i++) x[off + i] *= s;
    }

    /** out[outOff + i] = a[aOff + i] + b[bOff + i] over n elements (out may be a or b at the same offset). */
    public static void sum(float[] a, int aOff, float[] b, int bOff, float[] out, int outOff, int n) {
        int i = 0;
        for (int bound = n - n % EL; i < bound; i += EL)
            FloatVector.fromArray(E, a, aOff + i).add(FloatVector.fromArray(E, b, bOff + i)).intoArray(out, outOff + i);
        for (; i < n; i++) out[outOff + i] = a[aOff + i] + b[bOff + i];
    }

    public static void add(float[] acc, int accOff, float[] x, int xOff, int n) {
        var i = 0;
        for (int bound = n - (n % EL); i < bound; i += EL)
            FloatVector.fromArray(E, acc, accOff + i).add(FloatVector.fromArray(E, x, xOff + i)).intoArray(acc, accOff + i);
        for (; i < n; i++) acc[accOff + i] += x[xOff + i];
    }
}
