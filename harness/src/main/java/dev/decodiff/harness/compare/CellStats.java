package dev.decodiff.harness.compare;

import dev.decodiff.engine.CapturePoints;

/**
 * The comparison of one cell (step, capture point): rel L2 ‖c−r‖/‖r‖ (primary), cosine, norm ratio ‖c‖/‖r‖,
 * max |c−r| with its flat index, and the count of NaN/Inf in the candidate (always a failure).
 * A cell whose shapes differ only along the read axis of k_read/v_read (an engine reading a different number of
 * positions) fails with {@link #shapeNote} set.
 */
public record CellStats(int step, String point, long[] shape, double relL2, double cosine, double normRatio,
                        double refNorm, double candNorm, double maxAbsDiff, long maxIndex, long nonFinite,
                        double tolerance, String shapeNote) {

    public static CellStats of(int step, String point, long[] shape, CellKernel.Sums s, double tolerance) {
        double refNorm = Math.sqrt(s.rr()), candNorm = Math.sqrt(s.cc());
        double rel = CellKernel.ratio(s.dd(), s.rr());
        double cos = s.rr() == 0 || s.cc() == 0 ? (s.rr() == s.cc() ? 1 : 0) : s.cr() / (refNorm * candNorm);
        double ratio = s.rr() == 0 ? (s.cc() == 0 ? 1 : Double.POSITIVE_INFINITY) : candNorm / refNorm;
        if (s.nonFiniteCand() > 0) rel = Double.NaN;
        return new CellStats(step, point, shape, rel, cos, ratio, refNorm, candNorm, s.maxAbs(), s.maxIndex(),
                s.nonFiniteCand(), tolerance, null);
    }

    public static CellStats shapeMismatch(int step, String point, long[] refShape, long[] candShape, double tolerance) {
        return new CellStats(step, point, refShape, Double.POSITIVE_INFINITY, Double.NaN, Double.NaN, Double.NaN, Double.NaN,
                Double.NaN, -1, 0, tolerance, "candidate reads " + candShape[0] + " positions where the reference reads " + refShape[0]);
    }

    public boolean passed() { return nonFinite == 0 && shapeNote == null && relL2 <= tolerance; }

    public boolean failed() { return !passed(); }

    public int layer() { return CapturePoints.layerOf(point); }

    /** The point's kind: "attn.v_read" for "layers.5.attn.v_read", the name itself for model-level points. */
    public String kind() { return CapturePoints.kindOf(point); }

    /** How much of the tolerance this cell uses (rel L2 / tolerance); ∞ for NaN/Inf. */
    public double usage() { return nonFinite > 0 || Double.isNaN(relL2) ? Double.POSITIVE_INFINITY : relL2 / tolerance; }

    /** The multi-index of the largest |Δ|, e.g. [3, 0, 17]. */
    public long[] maxIndexND() { return indexND(shape, maxIndex); }

    /** The multi-index of a flat row-major index into {@code shape}. */
    /** rel L2 = ‖c − r‖₂ / ‖r‖₂ of two whole arrays, summed in double (0 when both are zero, ∞ when only r is). */
    public static double relL2(float[] c, float[] r) {
        double num = 0, den = 0;
        for (int i = 0; i < c.length; i++) {
            double d = (double) c[i] - r[i];
            num += d * d;
            den += (double) r[i] * r[i];
        }
        return den == 0 ? (num == 0 ? 0 : Double.POSITIVE_INFINITY) : Math.sqrt(num / den);
    }

    public static long[] indexND(long[] shape, long flat) {
        var idx = new long[shape.length];
        long rem = Math.max(0, flat);
        for (int i = shape.length - 1; i >= 0; i--) {
            long d = Math.max(1, shape[i]);
            idx[i] = rem % d;
            rem /= d;
        }
        return idx;
    }
}
