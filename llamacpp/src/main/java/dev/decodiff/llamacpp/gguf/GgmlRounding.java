package dev.decodiff.llamacpp.gguf;

import java.util.Locale;

/**
 * How far a ggml type's stored value may be from the float it was made from: a bound per element, derived from the
 * format and its quantizer for each block of the original values, so that a stored matrix can be told from a different
 * one. A matrix whose every element is within its block's bound is that matrix rounded by the type; one that is not
 * (rows permuted, scaled, corrupted, another checkpoint's) is not, whatever it multiplies to.
 * <p>Per type, with d the block's step and h = 2⁻¹¹ the relative rounding of an fp16 scale (half an fp16 ulp; below
 * fp16's normal range, 2⁻²⁵ absolute):
 * <ul>
 * <li>F16: half an fp16 ulp of w, ≤ |w|·2⁻¹¹ (2⁻²⁵ below the normal range). BF16: half a bf16 ulp, ≤ |w|·2⁻⁸ (2⁻¹³⁴
 *     among fp32's subnormals, which ggml's conversion rounds rather than flushes).
 * <li>Q8_0 (quantize_row_q8_0_ref): d = amax/127, q = round(w/d), stored q·fp16(d): |w − q·fp16(d)| ≤ d/2 + 127·|d − fp16(d)|.
 * <li>Q4_0 and Q5_0: d = m/−8 (m/−16) with m the block's signed extreme, q = min(15, ⌊w/d + 8.5⌋) (31, 16.5): the
 *     values opposite the extreme clamp at one step short of it, so a whole step d = amax/8 (amax/16), plus 8 (16)
 *     fp16 scale roundings.
 * <li>Q4_1 and Q5_1: d = (max − min)/15 (31), q = round((w − min)/d), stored q·fp16(d) + fp16(min): d/2, plus 15 (31)
 *     scale roundings and the minimum's own.
 * <li>The K-quants: the quantizer searches each sub-block's scale (and minimum) around range/nmax, refits them by least
 *     squares and rounds them to 6 bits (Q4_K, Q5_K: 32-value sub-blocks, 0…15 or 0…31 about a minimum) or 8 bits
 *     (Q6_K: 16-value sub-blocks, −32…31) of the super-block's fp16 scale, then quantizes each value again with the
 *     rounded scale. No closed form follows from the search; the bound is one step of the super-block's coarsest
 *     sub-block (half a step of rounding, half a step where a searched scale clips an extreme), with the step taken as
 *     range/(nmax − 1) — the search's widest — plus the 6-bit minimum's quantum, widened by a quarter for the refit.
 *     Still far below what moving a value to another row or scaling a row does.
 * </ul>
 * Every bound is widened by 2⁻¹⁰ of itself: the quantizers compute 1/d and w·(1/d) in fp32, which moves a rounding
 * point by a few ulps of w.
 */
public final class GgmlRounding {
    private GgmlRounding() {}

    private static final double H = 0x1p-11, MARGIN = 1 + 0x1p-10;

    /** Whether {@link #check} has a bound for this type. */
    public static boolean bounds(GgmlType t) {
        return switch (t) {
            case F16, BF16, Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, Q4_K, Q5_K, Q6_K -> true;
            default -> false;
        };
    }

    /**
     * Null when every element of {@code stored} is within type {@code t}'s rounding of {@code original} (both in the
     * GGUF's order: rows of {@code rowLength} values, blocks along each row); otherwise where it is not, in words: the
     * worst block's row and columns, its largest difference against its bound, and how many blocks are over.
     */
    public static String check(GgmlType t, float[] original, float[] stored, int rowLength) {
        if (original.length != stored.length) return "holds " + stored.length + " values where the checkpoint has " + original.length;
        int bs = switch (t) {
            case F16, BF16 -> 1;
            case Q4_K, Q5_K, Q6_K -> 256;
            default -> 32;
        };
        if (!bounds(t)) return "has no rounding bound for " + t;
        if (rowLength % bs != 0 || original.length % rowLength != 0) return "rows of " + rowLength + " are no whole number of " + bs + "-value blocks";
        int over = 0, blocks = original.length / bs, worstAt = -1;
        double worstRatio = 0, worstDiff = 0, worstBound = 0;
        for (int b = 0; b < blocks; b++) {
            int o = b * bs;
            double bound = blockBound(t, original, o, bs) * MARGIN, diff = 0;
            for (int j = 0; j < bs; j++) {
                double e = Math.abs((double) original[o + j] - stored[o + j]);
                if (Double.isNaN(e)) e = Double.POSITIVE_INFINITY;
                diff = Math.max(diff, e);
            }
            if (diff <= bound) continue;
            over++;
            double ratio = bound > 0 ? diff / bound : Double.POSITIVE_INFINITY;
            if (ratio > worstRatio || worstAt < 0) {
                worstRatio = ratio;
                worstAt = o;
                worstDiff = diff;
                worstBound = bound;
            }
        }
        if (over == 0) return null;
        int row = worstAt / rowLength, col = worstAt % rowLength;
        String where = bs == 1 ? "row " + row + ", column " + col : "row " + row + ", columns " + col + "–" + (col + bs - 1);
        return String.format(Locale.ROOT, "%s differs by %.3g from the checkpoint, over %s's rounding bound %.3g (%d of %d %s over)",
                where, worstDiff, t, worstBound, over, blocks, bs == 1 ? "values" : "blocks");
    }

    /** The bound of one block [o, o + n) of the original values, before the margin. */
    static double blockBound(GgmlType t, float[] w, int o, int n) {
        return switch (t) {
            case F16 -> Math.max(Math.abs(w[o]) * H, 0x1p-25);
            case BF16 -> Math.max(Math.abs(w[o]) * 0x1p-8, 0x1p-134);
            case Q8_0 -> symmetric(amax(w, o, n) / 127, 0.5, 127);
            case Q4_0 -> symmetric(amax(w, o, n) / 8, 1, 8);
            case Q5_0 -> symmetric(amax(w, o, n) / 16, 1, 16);
            case Q4_1 -> affine(w, o, n, 15);
            case Q5_1 -> affine(w, o, n, 31);
            case Q4_K -> kQuant(w, o, 32, 15, true);
            case Q5_K -> kQuant(w, o, 32, 31, true);
            case Q6_K -> kQuant(w, o, 16, 32, false);
            default -> throw new IllegalArgumentException("no rounding bound for " + t);
        };
    }

    /** |d − fp16(d)|: half an fp16 ulp of the scale (absolute below fp16's normal range). */
    private static double scaleRounding(double d) { return Math.max(Math.abs(d) * H, 0x1p-25); }

    /** {@code steps}·d of rounding (or clamping), plus {@code levels} roundings of the fp16 scale. */
    private static double symmetric(double d, double steps, int levels) { return steps * d + levels * scaleRounding(d); }

    private static double affine(float[] w, int o, int n, int nmax) {
        double min = Double.POSITIVE_INFINITY, max = Double.NEGATIVE_INFINITY;
        for (int j = 0; j < n; j++) {
            min = Math.min(min, w[o + j]);
            max = Math.max(max, w[o + j]);
        }
        double d = (max - min) / nmax;
        return d / 2 + nmax * scaleRounding(d) + scaleRounding(min);
    }

    /**
     * One step of the super-block's coarsest sub-block (range/(nmax − 1); for the symmetric Q6_K amax/(nmax − 1)), the
     * 6-bit minimum's quantum (the largest minimum / 63) and the fp16 super-scales' roundings, widened by a quarter.
     */
    private static double kQuant(float[] w, int o, int sub, int nmax, boolean withMin) {
        double step = 0, minimum = 0;
        for (int s = o; s < o + 256; s += sub) {
            double lo = 0, hi = Double.NEGATIVE_INFINITY, a = 0;
            for (int j = 0; j < sub; j++) {
                lo = Math.min(lo, w[s + j]);
                hi = Math.max(hi, w[s + j]);
                a = Math.max(a, Math.abs(w[s + j]));
            }
            step = Math.max(step, withMin ? (hi - lo) / (nmax - 1) : a / (nmax - 1));
            minimum = Math.max(minimum, -lo);
        }
        double m = withMin ? minimum / 63 : 0;
        return 1.25 * (step + m) + nmax * scaleRounding(step) + scaleRounding(minimum);
    }

    private static double amax(float[] w, int o, int n) {
        double a = 0;
        for (int j = 0; j < n; j++) a = Math.max(a, Math.abs(w[o + j]));
        return a;
    }
}
