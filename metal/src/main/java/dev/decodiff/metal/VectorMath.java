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
