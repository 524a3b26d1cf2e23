package dev.decodiff.metal;

import jdk.incubator.vector.DoubleVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.LongVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorShape;
import jdk.incubator.vector.VectorSpecies;

/**
 * exp, tanh, gelu-tanh and SiLU for fp32 activations, computed in double with the Vector API, as many lanes at a time as
 * the CPU's vectors hold.
 *
 * <p>Why not StrictMath: one call per element made gelu ~10 % of a prefill and the logit soft-cap ~4 % of a decode
 * step. Why not the Vector API's own EXP/TANH: those go to SVML when compiled and to Math in the interpreter, so a
 * result could change while the JIT warms up. Here every lane is plain IEEE arithmetic (add, multiply, fused
 * multiply-add, divide), which rounds the same way in every tier and on every machine: the scalar methods repeat
 * the lane computation operation by operation, so tails and scalar callers give the very same bits.
 *
 * <p>Accuracy: exp has a relative error of a few 10⁻¹⁶ on [−708, 709] (degree-12 Taylor after Cody–Waite reduction),
 * far below one fp32 ulp, so after rounding to float the results equal the correctly rounded ones except where the
 * exact value lies within ~10⁻¹⁶ of a rounding boundary (TranscendentalsTest checks against StrictMath).
 */
public final class Transcendentals {
    /**
     * The CPU's own vector width, not a fixed one: every operation here is lane-wise, so the width changes no bit, and
     * a width the CPU lacks (512 bits without AVX-512) would run as Java loops over the lanes, tens of times slower.
     */
    private static final VectorSpecies<Double> D = DoubleVector.SPECIES_PREFERRED;
    /** As many floats as D has doubles. */
    private static final VectorSpecies<Float> FD = VectorSpecies.of(float.class, VectorShape.forBitSize(D.vectorBitSize() / 2));
    private static final int N = D.length();

    private static final double SHIFTER = 0x1.8p52;
    private static final long SHIFTER_BITS = Double.doubleToRawLongBits(SHIFTER);
    private static final double INV_LN2 = 0x1.71547652b82fep0;
    private static final double LN2_HI = 0x1.62e42fefa3800p-1;
    private static final double LN2_LO = 0x1.ef35793c76730p-45;
    private static final double MIN_ARG = -708.0, MAX_ARG = 709.0;
    /** 1/n! for n = 12 down to 0, for Horner's rule. */
    private static final double[] TAYLOR = new double[13];
    private static final double SQRT_2_OVER_PI = Math.sqrt(2.0 / Math.PI);
    /** Below this |z|, tanh z comes from its series (exp-based tanh would lose digits to cancellation). */
    private static final double TANH_SERIES = 0x1p-10;

    static {
        double f = 1;
        for (int n = 0; n <= 12; n++) {
            if (n > 0) f *= n;
            TAYLOR[12 - n] = 1.0 / f;
        }
    }

    private Transcendentals() {}

    /** e^y; arguments are clamped to [−708, 709] (below: ~3·10⁻³⁰⁸, zero in fp32; above: overflow in fp32 anyway). */
    public static double exp(double y) {
        y = Math.min(Math.max(y, MIN_ARG), MAX_ARG);
        double t = Math.fma(y, INV_LN2, SHIFTER);
        double kd = t - SHIFTER;
        double r = Math.fma(kd, -LN2_HI, y);
        r = Math.fma(kd, -LN2_LO, r);
        double p = TAYLOR[0];
        for (int i = 1; i < TAYLOR.length; i++) p = Math.fma(p, r, TAYLOR[i]);
        long k = Double.doubleToRawLongBits(t) - SHIFTER_BITS;
        return p * Double.longBitsToDouble((k + 1023) << 52);
    }

    /**
     * y[j] = e^y[j] for j in [0, n), n a multiple of the lane count: {@link #exp(double)} lane by lane. The vector
     * code of each array method here lives in one method with its loop, arrays in and arrays out: a helper taking and
     * returning vectors that C2 declined to inline into a large caller ran out of line on the Vector API's
     * non-intrinsified path (one JVM in three spent 15 % of a 4-bit decode step there, in GELU's and softmax's exp).
     */
    private static void expBlock(double[] y, int n) {
        for (int j = 0; j < n; j += N) {
            var v = DoubleVector.fromArray(D, y, j).max(MIN_ARG).min(MAX_ARG);
            var t = v.fma(INV_LN2, SHIFTER);
            var kd = t.sub(SHIFTER);
            var r = kd.fma(DoubleVector.broadcast(D, -LN2_HI), v);
            r = kd.fma(DoubleVector.broadcast(D, -LN2_LO), r);
            var p = DoubleVector.broadcast(D, TAYLOR[0]);
            for (int i = 1; i < TAYLOR.length; i++) p = p.fma(r, DoubleVector.broadcast(D, TAYLOR[i]));
            var k = ((LongVector) t.reinterpretAsLongs()).sub(SHIFTER_BITS);
            p.mul(k.add(1023).lanewise(VectorOperators.LSHL, 52).reinterpretAsDoubles()).intoArray(y, j);
        }
    }

    /** Elements staged per {@link #expBlock} call. */
    private static final int BLOCK = 256;
    /** Each thread's staging block (softmax calls these methods per attention row and head: no allocation each time). */
    private static final ThreadLocal<double[]> STAGED = ThreadLocal.withInitial(() -> new double[BLOCK]);

    /**
     * gelu_pytorch_tanh(x) = 0.5·x·(1 + tanh(u)) = x / (1 + e^(−2u)), u = √(2/π)·(x + 0.044715·x³), in double. The
     * second form has no cancellation where tanh(u) → −1 (x below about −5), where the first loses all its digits.
     */
    public static float geluTanh(float x) {
        double xd = x;
        double u = SQRT_2_OVER_PI * (xd + 0.044715 * xd * xd * xd);
        return (float) (xd / (1.0 + exp(-2.0 * u)));
    }

    /** g[j] = geluTanh(g[j]) · u[j] for j in [from, to) (the gated MLP's activation; the product in fp32). */
    public static void geluTanhTimes(float[] g, float[] u, int from, int to) {
        double[] e = STAGED.get();
        int j = from;
        for (int bound = from + (to - from) / N * N; j < bound; ) {
            int m = Math.min(BLOCK, bound - j);
            for (int k = 0; k < m; k += N) {
                var xd = (DoubleVector) FloatVector.fromArray(FD, g, j + k).convertShape(VectorOperators.F2D, D, 0);
                xd.mul(0.044715).mul(xd).mul(xd).add(xd).mul(SQRT_2_OVER_PI).mul(-2.0).intoArray(e, k);
            }
            expBlock(e, m);
            for (int k = 0; k < m; k += N) {
                var xd = (DoubleVector) FloatVector.fromArray(FD, g, j + k).convertShape(VectorOperators.F2D, D, 0);
                var a = (FloatVector) xd.div(DoubleVector.fromArray(D, e, k).add(1.0)).convertShape(VectorOperators.D2F, FD, 0);
                a.mul(FloatVector.fromArray(FD, u, j + k)).intoArray(g, j + k);
            }
            j += m;
        }
        for (; j < to; j++) g[j] = geluTanh(g[j]) * u[j];
    }

    /**
     * SiLU, x·sigmoid(x) = x / (1 + e^(−x)): e^(−x) in double ({@link #exp(double)}), rounded to fp32, the sum and
     * the quotient in fp32. The array methods below repeat these operations lane by lane (the same bits).
     */
    public static float silu(float x) { return x / (1f + (float) exp(-(double) x)); }

    /** out[outOff + j] = silu(x[off + j]) for j in [0, n); out may alias x. */
    public static void silu(float[] x, int off, int n, float[] out, int outOff) { silu(x, off, n, out, outOff, null); }

    /** g[j] = silu(g[j]) · u[j] for j in [from, to) (SwiGLU's activation; the product in fp32). */
    public static void siluTimes(float[] g, float[] u, int from, int to) { silu(g, from, to - from, g, from, u); }

    /** out[outOff + j] = silu(x[off + j]), times u[off + j] where u is given (in fp32, after the quotient). */
    private static void silu(float[] x, int off, int n, float[] out, int outOff, float[] u) {
        double[] e = STAGED.get();
        int j = 0;
        for (int bound = n / N * N; j < bound; ) {
            int m = Math.min(BLOCK, bound - j);
            for (int k = 0; k < m; k += N)
                ((DoubleVector) FloatVector.fromArray(FD, x, off + j + k).convertShape(VectorOperators.F2D, D, 0)).neg().intoArray(e, k);
            expBlock(e, m);
            for (int k = 0; k < m; k += N) {
                var ef = (FloatVector) DoubleVector.fromArray(D, e, k).convertShape(VectorOperators.D2F, FD, 0);
                var y = FloatVector.fromArray(FD, x, off + j + k).div(ef.add(1f));
                (u == null ? y : y.mul(FloatVector.fromArray(FD, u, off + j + k))).intoArray(out, outOff + j + k);
            }
            j += m;
        }
        for (; j < n; j++) out[outOff + j] = u == null ? silu(x[off + j]) : silu(x[off + j]) * u[off + j];
    }

    /** tanh z in double: the series below 2⁻¹⁰, else (1 − e^(−2|z|)) / (1 + e^(−2|z|)) with z's sign. */
    public static double tanh(double z) {
        double a = Math.abs(z);
        if (a < TANH_SERIES) {
            double z2 = z * z; // z·(1 + z²·q) rather than z + z³·q: keeps the sign of −0
            return z * Math.fma(Math.fma(Math.fma(-17.0 / 315.0, z2, 2.0 / 15.0), z2, -1.0 / 3.0), z2, 1.0);
        }
        double e = exp(-2.0 * a);
        double t = (1.0 - e) / (1.0 + e);
        return z < 0 ? -t : t;
    }

    /** x[j] = tanh(x[j] / cap) · cap for j in [from, to): Gemma's final-logit soft-cap (divide and scale in fp32). */
    public static void softcap(float[] x, int from, int to, float cap) {
        double[] e = STAGED.get();
        int j = from;
        for (int bound = from + (to - from) / N * N; j < bound; ) {
            int m = Math.min(BLOCK, bound - j);
            for (int k = 0; k < m; k += N) {
                var z = (DoubleVector) FloatVector.fromArray(FD, x, j + k).div(cap).convertShape(VectorOperators.F2D, D, 0);
                z.abs().mul(-2.0).intoArray(e, k);
            }
            expBlock(e, m);
            for (int k = 0; k < m; k += N) {
                var z = (DoubleVector) FloatVector.fromArray(FD, x, j + k).div(cap).convertShape(VectorOperators.F2D, D, 0);
                var a = z.abs();
                var z2 = z.mul(z);
                var series = z2.fma(-17.0 / 315.0, 2.0 / 15.0).fma(z2, DoubleVector.broadcast(D, -1.0 / 3.0)).fma(z2, DoubleVector.broadcast(D, 1.0)).mul(z);
                var ev = DoubleVector.fromArray(D, e, k);
                var t = ev.neg().add(1.0).div(ev.add(1.0));
                t = t.blend(t.neg(), z.compare(VectorOperators.LT, 0.0));
                t = t.blend(series, a.compare(VectorOperators.LT, TANH_SERIES));
                ((FloatVector) t.convertShape(VectorOperators.D2F, FD, 0)).mul(cap).intoArray(x, j + k);
            }
            j += m;
        }
        for (; j < to; j++) x[j] = (float) tanh(x[j] / cap) * cap;
    }

    /** x[j] = (float) e^(x[j] − max) for j in [off, off+n) (the difference in fp32, as softmax takes it). */
    public static void expShifted(float[] x, int off, int n, float max) {
        double[] e = STAGED.get();
        int j = off, end = off + n;
        for (int bound = off + n / N * N; j < bound; ) {
            int m = Math.min(BLOCK, bound - j);
            for (int k = 0; k < m; k += N)
                ((DoubleVector) FloatVector.fromArray(FD, x, j + k).sub(max).convertShape(VectorOperators.F2D, D, 0)).intoArray(e, k);
            expBlock(e, m);
            for (int k = 0; k < m; k += N)
                ((FloatVector) DoubleVector.fromArray(D, e, k).convertShape(VectorOperators.D2F, FD, 0)).intoArray(x, j + k);
            j += m;
        }
        for (; j < end; j++) x[j] = (float) exp(x[j] - max);
    }
}
