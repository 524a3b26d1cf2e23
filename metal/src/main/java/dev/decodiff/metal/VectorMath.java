package dev.decodiff.metal;

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
        var acc = FloatVector.zero(F);
        int i = 0;
        for (int bound = n - (n % L); i < bound; i += L)
            acc = FloatVector.fromArray(F, a, aOff + i).fma(FloatVector.fromArray(F, b, bOff + i), acc);
        float s = sumLanes(acc);
        for (; i < n; i++) s += a[aOff + i] * b[bOff + i];
        return s;
    }

    /**
     * scores[i] = q·k_i for i < n, k_i = keys[i][keyOff[i] ..], each exactly {@link #dot}(q, qOff, keys[i], keyOff[i], d):
     * four keys at a time, so four FMA chains (and four lane sums) overlap instead of waiting on one another.
     */
    public static void dots(float[] q, int qOff, float[][] keys, int[] keyOff, int n, int d, float[] scores) {
        int bound = d - (d % L), i = 0;
        float[] lanes = new float[4 * L];
        for (; i + 4 <= n; i += 4) {
            float[] k0 = keys[i], k1 = keys[i + 1], k2 = keys[i + 2], k3 = keys[i + 3];
            int o0 = keyOff[i], o1 = keyOff[i + 1], o2 = keyOff[i + 2], o3 = keyOff[i + 3];
            var a0 = FloatVector.zero(F);
            var a1 = a0;
            var a2 = a0;
            var a3 = a0;
            for (int c = 0; c < bound; c += L) {
                var qv = FloatVector.fromArray(F, q, qOff + c);
                a0 = qv.fma(FloatVector.fromArray(F, k0, o0 + c), a0);
                a1 = qv.fma(FloatVector.fromArray(F, k1, o1 + c), a1);
                a2 = qv.fma(FloatVector.fromArray(F, k2, o2 + c), a2);
                a3 = qv.fma(FloatVector.fromArray(F, k3, o3 + c), a3);
            }
            a0.intoArray(lanes, 0);
            a1.intoArray(lanes, L);
            a2.intoArray(lanes, 2 * L);
            a3.intoArray(lanes, 3 * L);
            float s0 = 0f, s1 = 0f, s2 = 0f, s3 = 0f;
            for (int k = 0; k < L; k++) {
                s0 += lanes[k];
                s1 += lanes[L + k];
                s2 += lanes[2 * L + k];
                s3 += lanes[3 * L + k];
            }
            for (int c = bound; c < d; c++) {
                float qc = q[qOff + c];
                s0 += qc * k0[o0 + c];
                s1 += qc * k1[o1 + c];
                s2 += qc * k2[o2 + c];
                s3 += qc * k3[o3 + c];
            }
            scores[i] = s0;
            scores[i + 1] = s1;
            scores[i + 2] = s2;
            scores[i + 3] = s3;
        }
        for (; i < n; i++) scores[i] = dot(q, qOff, keys[i], keyOff[i], d);
    }

    /**
     * out[outOff + e] += Σ_i p[i]·v_i[e] over i < n in order, v_i = values[i][valueOff[i] ..]: the same FMAs in the
     * same order as n calls of {@link #axpy}, but with the output held in registers across all the rows (a block of
     * four vectors at a time) instead of loaded and stored once per row.
     */
    public static void weightedSum(float[] p, float[][] values, int[] valueOff, int n, int d, float[] out, int outOff) {
        int bound = d - (d % L), c = 0;
        for (; c + 4 * L <= bound; c += 4 * L) {
            var o0 = FloatVector.fromArray(F, out, outOff + c);
            var o1 = FloatVector.fromArray(F, out, outOff + c + L);
            var o2 = FloatVector.fromArray(F, out, outOff + c + 2 * L);
            var o3 = FloatVector.fromArray(F, out, outOff + c + 3 * L);
            for (int i = 0; i < n; i++) {
                var pv = FloatVector.broadcast(F, p[i]);
                float[] v = values[i];
                int o = valueOff[i] + c;
                o0 = FloatVector.fromArray(F, v, o).fma(pv, o0);
                o1 = FloatVector.fromArray(F, v, o + L).fma(pv, o1);
                o2 = FloatVector.fromArray(F, v, o + 2 * L).fma(pv, o2);
                o3 = FloatVector.fromArray(F, v, o + 3 * L).fma(pv, o3);
            }
            o0.intoArray(out, outOff + c);
            o1.intoArray(out, outOff + c + L);
            o2.intoArray(out, outOff + c + 2 * L);
            o3.intoArray(out, outOff + c + 3 * L);
        }
        for (; c < bound; c += L) {
            var o0 = FloatVector.fromArray(F, out, outOff + c);
            for (int i = 0; i < n; i++) o0 = FloatVector.fromArray(F, values[i], valueOff[i] + c).fma(FloatVector.broadcast(F, p[i]), o0);
            o0.intoArray(out, outOff + c);
        }
        for (; c < d; c++) {
            float s = out[outOff + c];
            for (int i = 0; i < n; i++) s += p[i] * values[i][valueOff[i] + c];
            out[outOff + c] = s;
        }
    }

    /** y += a·x over n elements. */
    public static void axpy(float a, float[] x, int xOff, float[] y, int yOff, int n) {
        var va = FloatVector.broadcast(F, a);
        int i = 0;
        for (int bound = n - (n % L); i < bound; i += L)
            FloatVector.fromArray(F, x, xOff + i).fma(va, FloatVector.fromArray(F, y, yOff + i)).intoArray(y, yOff + i);
        for (; i < n; i++) y[yOff + i] += a * x[xOff + i];
    }

    /** Mean of squares in double (the reference's reduction order differs from any loop by ~1e-7 anyway). */
    public static double meanSquare(float[] x, int off, int n) {
        double s = 0;
        for (int i = 0; i < n; i++) {
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
        if (w == null) {
            for (int i = 0; i < n; i++) out[outOff + i] = x[off + i] * inv;
        } else {
            for (int i = 0; i < n; i++) out[outOff + i] = (x[off + i] * inv) * w[i];
        }
    }

    /** gelu_pytorch_tanh: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), see {@link Transcendentals#geluTanh}. */
    public static float geluTanh(float x) {
        return Transcendentals.geluTanh(x);
    }

    /** In-place softmax of x[off..off+n), max-subtracted, fp32 result. */
    public static void softmax(float[] x, int off, int n) {
        float max = Float.NEGATIVE_INFINITY;
        for (int i = 0; i < n; i++) max = Math.max(max, x[off + i]);
        Transcendentals.expShifted(x, off, n, max);
        double sum = 0;
        for (int i = 0; i < n; i++) sum += x[off + i];
        float inv = (float) (1.0 / sum);
        for (int i = 0; i < n; i++) x[off + i] *= inv;
    }

    public static void scale(float[] x, int off, int n, float s) {
        for (int i = 0; i < n; i++) x[off + i] *= s;
    }

    public static void add(float[] acc, int accOff, float[] x, int xOff, int n) {
        var i = 0;
        for (int bound = n - (n % L); i < bound; i += L)
            FloatVector.fromArray(F, acc, accOff + i).add(FloatVector.fromArray(F, x, xOff + i)).intoArray(acc, accOff + i);
        for (; i < n; i++) acc[accOff + i] += x[xOff + i];
    }
}
