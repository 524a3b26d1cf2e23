package dev.decodiff.harness.compare;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.harness.dump.StepTensors;
import dev.decodiff.metal.TensorView;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Locale;

/**
 * A one-line explanation of a failing cell where a known pattern fits (DESIGN.md §5): the candidate equals another
 * reference tensor of the same step and layer (values == keys), a constant scale factor, positions shifted by one
 * along the read axis of k_read/v_read, permuted heads, or swapped axes. Returns null when nothing fits: decodiff
 * does not guess.
 */
public final class Diagnosis {
    private Diagnosis() {}

    /** Below this rel L2 two tensors count as "equal" for a diagnosis. */
    static double nearEqual(double tol) { return Math.max(10 * tol, 1e-3); }

    public static String explain(CellStats cell, StepTensors ref, StepTensors cand) {
        String p = cell.point();
        TensorView r = ref.tensor(p), c = cand.tensor(p);
        double near = nearEqual(cell.tolerance());
        if (cell.nonFinite() > 0) return nonFinite(cell, c);
        if (cell.shapeNote() != null) {
            String shift = readWindowShift(r, c, near);
            return cell.shapeNote() + (shift != null ? "; " + shift : "") + ": the read window is off by one";
        }
        String eq = equalsOther(p, c, ref, near);
        if (eq != null) return eq;
        String rows = rowsEqualOther(p, r, c, ref, cell.tolerance(), near);
        if (rows != null) return rows;
        String scale = scale(cell, near);
        if (scale != null) return scale;
        String kind = CapturePoints.kindOf(p);
        if (CapturePoints.isCacheRead(kind) && r.rank() >= 1 && r.dim(0) >= 2) {
            String shift = positionShift(r, c, near);
            if (shift != null) return shift;
            String order = rowOrder(r, c, ref, near);
            if (order != null) return order;
        }
        if (kind.equals(CapturePoints.LOGITS)) {
            String cap = softcap(r, c, near);
            if (cap != null) return cap;
        }
        String perVector = perVectorScale(r, c, near);
        if (perVector != null) return perVector;
        if (kind.equals(CapturePoints.Q) || kind.equals(CapturePoints.K) || kind.equals(CapturePoints.K_READ)) {
            String rot = rotation(r, c, near);
            if (rot != null) return rot;
        }
        int headDim = headDim(p, r, ref);
        if (headDim > 0) {
            String perm = headPermutation(r, c, headDim, near);
            if (perm != null) return perm;
            String swap = swappedAxes(r, c, headDim, near);
            if (swap != null) return swap;
        }
        return null;
    }

    private static String nonFinite(CellStats cell, TensorView c) {
        long first = -1;
        long n = c.elementCount();
        for (long i = 0; i < n; i++) if (!Float.isFinite(c.getFloat(i))) { first = i; break; }
        var ci = indexND(c.shape(), first);
        return "the candidate has " + cell.nonFinite() + " NaN/Inf value" + (cell.nonFinite() == 1 ? "" : "s")
                + " (first at " + Arrays.toString(ci) + " = " + c.getFloat(first) + ")";
    }

    // ------------------------------------------------------------------ equality with another reference tensor

    private static String equalsOther(String p, TensorView c, StepTensors ref, double near) {
        int layer = CapturePoints.layerOf(p);
        String best = null;
        double bestRel = Double.POSITIVE_INFINITY;
        var candidates = new ArrayList<String>();
        for (String q : ref.points()) {
            if (q.equals(p) || CapturePoints.layerOf(q) != layer) continue;
            candidates.add(q);
        }
        if (layer >= 0) {
            String kind = CapturePoints.kindOf(p);
            for (int l = layer - 1; l >= 0; l--) {          // nearest earlier layers first
                String other = CapturePoints.layer(l, kind);
                if (ref.points().contains(other)) candidates.add(other);
            }
        }
        for (String q : candidates) {
            TensorView o = ref.tensor(q);
            if (!Arrays.equals(o.shape(), c.shape())) continue;
            double rel = CellKernel.relL2Gather(o, i -> i, c, i -> i, c.elementCount());
            if (rel <= near && rel < bestRel) {
                bestRel = rel;
                best = q;
            }
        }
        if (best == null) return null;
        String how = bestRel == 0 ? "bit-identical to" : "equal to (rel L2 " + fmt(bestRel) + ")";
        String pk = CapturePoints.kindOf(p), qk = CapturePoints.kindOf(best);
        int ql = CapturePoints.layerOf(best);
        if (ql != layer) {
            String kind = CapturePoints.kindOf(p);
            if (CapturePoints.isCacheRead(kind))
                return "the candidate's " + p + " is " + how + " the reference's " + best + ": layer " + layer + " reads layer " + ql + "'s cache";
            return "the candidate's " + p + " is " + how + " the reference's " + best + ": layer " + layer + " repeats layer " + ql + "'s result";
        }
        return "the candidate's " + p + " is " + how + " the reference's " + best + meaning(pk, qk);
    }

    private static String meaning(String pk, String qk) {
        return switch (pk + "=" + qk) {
            case CapturePoints.V_READ + "=" + CapturePoints.K_READ -> ": the values read back from the cache are the keys (the cache hands back keys as values)";
            case CapturePoints.K_READ + "=" + CapturePoints.V_READ -> ": the keys read back from the cache are the values";
            case CapturePoints.V + "=" + CapturePoints.K -> ": the values entering the cache are the keys";
            case CapturePoints.K + "=" + CapturePoints.V -> ": the keys entering the cache are the values";
            case CapturePoints.K + "=" + CapturePoints.Q, CapturePoints.Q + "=" + CapturePoints.K -> ": queries and keys are mixed up";
            case CapturePoints.OUT + "=" + CapturePoints.ATTN_OUT, CapturePoints.OUT + "=" + CapturePoints.MLP_OUT,
                 CapturePoints.OUT + "=" + CapturePoints.MOE_OUT -> ": the layer's output skips the residual stream";
            default -> "";
        };
    }

    /**
     * Row by row along axis 0 (positions for k_read/v_read, tokens elsewhere): some rows equal another reference
     * tensor of the same layer and the others are right — e.g. the values read back from the cache are the keys for
     * every cached position, while the newest position, computed in this very step, is correct.
     */
    private static String rowsEqualOther(String p, TensorView r, TensorView c, StepTensors ref, double tol, double near) {
        if (r.rank() < 2 || r.dim(0) < 2) return null;
        int layer = CapturePoints.layerOf(p);
        long rows = r.dim(0), row = r.elementCount() / rows;
        for (String q : ref.points()) {
            if (q.equals(p) || CapturePoints.layerOf(q) != layer) continue;
            TensorView o = ref.tensor(q);
            if (!Arrays.equals(o.shape(), c.shape())) continue;
            var equal = new ArrayList<Long>();
            boolean identical = true, explained = true;
            double worst = 0;
            for (long j = 0; j < rows && explained; j++) {
                double relOther = CellKernel.relL2Rows(o, j, c, j, 1, row);
                if (relOther <= near && CellKernel.relL2Rows(r, j, c, j, 1, row) > tol) {
                    equal.add(j);
                    identical &= relOther == 0;
                    worst = Math.max(worst, relOther);
                } else if (CellKernel.relL2Rows(r, j, c, j, 1, row) > tol) {
                    explained = false;
                }
            }
            if (!explained || equal.isEmpty()) continue;
            String kind = CapturePoints.kindOf(p);
            boolean positions = CapturePoints.isCacheRead(kind);
            long first = positions ? ref.start() + ref.length() - rows : ref.start();
            String which = (positions ? "positions " : "token positions ") + ranges(equal, first);
            String rest = equal.size() == rows ? "" : " (its other rows are right)";
            return "at " + which + " the candidate's " + p + " is " + (identical ? "bit-identical to" : "equal (rel L2 ≤ " + fmt(worst) + ") to")
                    + " the reference's " + q + rest + meaning(kind, CapturePoints.kindOf(q));
        }
        return null;
    }

    static String ranges(java.util.List<Long> rows, long offset) {
        var sb = new StringBuilder();
        int i = 0;
        while (i < rows.size()) {
            int j = i;
            while (j + 1 < rows.size() && rows.get(j + 1) == rows.get(j) + 1) j++;
            if (!sb.isEmpty()) sb.append(", ");
            long a = rows.get(i) + offset, b = rows.get(j) + offset;
            sb.append(a == b ? Long.toString(a) : a + "–" + b);
            i = j + 1;
        }
        return sb.toString();
    }

    // ------------------------------------------------------------------ constant scale

    private static String scale(CellStats cell, double near) {
        if (!(cell.refNorm() > 0) || !(cell.candNorm() > 0) || Double.isNaN(cell.cosine())) return null;
        double cos = Math.min(1, cell.cosine());
        double sin = Math.sqrt(Math.max(0, 1 - cos * cos));
        double alpha = cell.normRatio() * cos;
        if (sin > near || Math.abs(alpha - 1) <= 10 * cell.tolerance()) return null;
        return "a constant scale factor: candidate ≈ " + fmtFactor(alpha) + " × reference (norms " + fmtNorm(cell.candNorm())
                + " vs " + fmtNorm(cell.refNorm()) + ")" + namedFactor(alpha);
    }

    /**
     * Names factors that usually mean something: √n or 1/√n for small n and for powers of two (a missing or doubled
     * attention scale √d, an embedding scale √H). Only numbers sparse enough that a match is not a coincidence.
     */
    static String namedFactor(double a) {
        double abs = Math.abs(a);
        if (abs < 1e-12) return "";
        String sign = a < 0 ? "−" : "";
        var ns = new java.util.TreeSet<Integer>();
        for (int n = 2; n <= 16; n++) ns.add(n);
        for (int n = 32; n <= 1 << 16; n <<= 1) ns.add(n);
        for (int n : ns) {
            double root = Math.sqrt(n);
            boolean isSquare = Math.rint(root) == root;
            if (Math.abs(abs - root) / root < 1e-3) return isSquare ? "" : " = " + sign + "√" + n;
            if (Math.abs(abs * root - 1) < 1e-3) return isSquare ? " = " + sign + "1/" + (int) root : " = " + sign + "1/√" + n;
        }
        return "";
    }

    // ------------------------------------------------------------------ positions along the read axis

    private static String positionShift(TensorView r, TensorView c, double near) {
        long rows = r.dim(0), row = r.elementCount() / rows;
        double plus = CellKernel.relL2Rows(r, 1, c, 0, rows - 1, row);   // candidate row i = reference row i+1
        double minus = CellKernel.relL2Rows(r, 0, c, 1, rows - 1, row);  // candidate row i = reference row i−1
        if (plus <= near && plus <= minus)
            return "off by one position: candidate row i holds the reference's position i+1 along the read axis (C) — the read window starts one position late";
        if (minus <= near)
            return "off by one position: candidate row i holds the reference's position i−1 along the read axis (C) — the read window starts one position early";
        return null;
    }

    /** When the candidate reads one position more or fewer: which end lines up. */
    private static String readWindowShift(TensorView r, TensorView c, double near) {
        if (r.rank() != c.rank() || r.rank() < 1) return null;
        long rr = r.dim(0), cr = c.dim(0), row = rr == 0 ? 0 : r.elementCount() / rr;
        long common = Math.min(rr, cr);
        if (common == 0 || row == 0) return null;
        // newest positions aligned (both end at p)
        double tail = CellKernel.relL2Rows(r, rr - common, c, cr - common, common, row);
        if (tail <= near) return cr > rr
                ? "its newest " + common + " positions match, it also reads " + (cr - rr) + " older one" + (cr - rr == 1 ? "" : "s")
                : "its " + common + " positions match the newest of the reference's, it misses " + (rr - cr) + " older one" + (rr - cr == 1 ? "" : "s");
        double head = CellKernel.relL2Rows(r, 0, c, 0, common, row);
        if (head <= near) return "its first " + common + " positions match, the window ends " + Math.abs(cr - rr) + " position" + (Math.abs(cr - rr) == 1 ? "" : "s") + (cr > rr ? " late" : " early");
        return null;
    }

    /** The rows of a read window that hold reference positions in another order (a ring buffer indexed wrongly). */
    private static String rowOrder(TensorView r, TensorView c, StepTensors ref, double near) {
        long rows = r.dim(0), row = r.elementCount() / rows;
        if (rows > 4096) return null;
        long first = ref.start() + ref.length() - rows;
        var holds = new long[(int) rows];
        int misplaced = 0, foreign = 0;
        for (long j = 0; j < rows; j++) {
            holds[(int) j] = -1;
            if (CellKernel.relL2Rows(r, j, c, j, 1, row) <= near) { holds[(int) j] = j; continue; }
            for (long i = 0; i < rows; i++) {
                if (i != j && CellKernel.relL2Rows(r, i, c, j, 1, row) <= near) { holds[(int) j] = i; break; }
            }
            if (holds[(int) j] < 0) foreign++;
            else misplaced++;
        }
        if (misplaced == 0) return null;
        var sb = new StringBuilder("the read window is in the wrong order: ");
        var parts = new java.util.ArrayList<String>();
        for (int j = 0; j < rows; j++) {
            if (holds[j] == j) continue;
            parts.add("row " + j + " (position " + (first + j) + ") holds " + (holds[j] < 0 ? "no position of the window" : "position " + (first + holds[j])));
            if (parts.size() == 4) break;
        }
        sb.append(String.join(", ", parts));
        if (misplaced + foreign > parts.size()) sb.append(", …");
        sb.append(foreign > 0 ? " — positions are written to or read from the wrong cache slots" : " — the cache slots are read in the wrong order");
        return sb.toString();
    }

    /** Logits that the reference soft-caps and the candidate does not: reference ≈ cap·tanh(candidate/cap). */
    private static String softcap(TensorView r, TensorView c, double near) {
        long n = c.elementCount();
        double maxR = 0, maxC = 0;
        for (long i = 0; i < n; i++) {
            maxR = Math.max(maxR, Math.abs(r.getFloat(i)));
            maxC = Math.max(maxC, Math.abs(c.getFloat(i)));
        }
        if (!(maxC > maxR)) return null;
        double best = Double.POSITIVE_INFINITY, bestCap = 0;
        for (double cap = Math.max(1, Math.floor(maxR)); cap <= 200; cap += 0.5) {
            final double k = cap;
            double num = 0, den = 0;
            for (long i = 0; i < n; i++) {
                double x = r.getFloat(i), y = k * Math.tanh(c.getFloat(i) / k);
                num += (y - x) * (y - x);
                den += x * x;
            }
            double rel = CellKernel.ratio(num, den);
            if (rel < best) { best = rel; bestCap = cap; }
        }
        if (best > near) return null;
        String cap = Fmt(bestCap);
        return "the final soft-cap is missing: the reference's logits are " + cap + "·tanh(candidate / " + cap + ") (rel L2 " + fmt(best) + ")";
    }

    private static String Fmt(double x) { return x == Math.rint(x) ? Long.toString((long) x) : Double.toString(x); }

    /**
     * Every vector along the last axis is the reference's times its own factor: a normalisation (RMSNorm of each
     * head or token) is missing or applied twice.
     */
    private static String perVectorScale(TensorView r, TensorView c, double near) {
        if (r.rank() < 2) return null;
        long d = r.dim(r.rank() - 1), vectors = r.elementCount() / Math.max(1, d);
        if (d < 2 || vectors < 2) return null;
        double lo = Double.POSITIVE_INFINITY, hi = Double.NEGATIVE_INFINITY;
        for (long v = 0; v < vectors; v++) {
            double rr = 0, cc = 0, cr = 0;
            for (long k = 0; k < d; k++) {
                double x = r.getFloat(v * d + k), y = c.getFloat(v * d + k);
                rr += x * x;
                cc += y * y;
                cr += x * y;
            }
            if (rr == 0 || cc == 0) return null;
            double cos = cr / Math.sqrt(rr * cc);
            if (Math.sqrt(Math.max(0, 1 - cos * cos)) > near) return null;
            double alpha = cr / rr;
            lo = Math.min(lo, alpha);
            hi = Math.max(hi, alpha);
        }
        if (hi - lo <= 10 * near * Math.max(1, Math.abs(hi))) return null; // a constant factor: scale() covers that
        return "each [" + d + "] vector of the candidate is the reference's times its own factor (" + fmtFactor(lo) + " to " + fmtFactor(hi)
                + "): a normalisation of each vector is missing or applied twice";
    }

    /** Every [d] vector keeps the reference's norm but points elsewhere: RoPE at the wrong angle or on the wrong dims. */
    private static String rotation(TensorView r, TensorView c, double near) {
        if (r.rank() < 2) return null;
        long d = r.dim(r.rank() - 1), vectors = r.elementCount() / Math.max(1, d);
        int moved = 0;
        for (long v = 0; v < vectors; v++) {
            double rr = 0, cc = 0, dd = 0;
            for (long k = 0; k < d; k++) {
                double x = r.getFloat(v * d + k), y = c.getFloat(v * d + k);
                rr += x * x;
                cc += y * y;
                dd += (y - x) * (y - x);
            }
            if (rr == 0) continue;
            if (Math.abs(Math.sqrt(cc / rr) - 1) > near) return null;
            if (Math.sqrt(dd / rr) > near) moved++;
        }
        if (moved == 0) return null;
        return moved + " of " + vectors + " [" + d + "] vectors keep the reference's norm but point elsewhere: a rotation —"
                + " RoPE at the wrong position, with the wrong frequencies, or on the wrong dimensions";
    }

    // ------------------------------------------------------------------ heads

    /** The head size for points with a head axis: [T, nh, d], [C, nkv, d], or attn.out [T, nh·d] using q's d. */
    private static int headDim(String p, TensorView r, StepTensors ref) {
        String kind = CapturePoints.kindOf(p);
        if (CapturePoints.hasHeadAxis(kind))
            return r.rank() == 3 && r.dim(1) >= 2 ? (int) r.dim(2) : -1;
        if (kind.equals(CapturePoints.ATTN_OUT) && r.rank() == 2) {
            String q = CapturePoints.layer(CapturePoints.layerOf(p), CapturePoints.Q);
            if (ref.points().contains(q)) {
                var qs = ref.tensor(q).shape();
                if (qs.length == 3 && qs[1] >= 2 && qs[1] * qs[2] == r.dim(1)) return (int) qs[2];
            }
        }
        return -1;
    }

    private static String headPermutation(TensorView r, TensorView c, int d, double near) {
        long rows = r.dim(0);
        int heads = (int) (r.elementCount() / rows / d);
        if (heads < 2 || heads > 256) return null;
        int[] map = new int[heads];
        boolean identity = true;
        var used = new boolean[heads];
        for (int h = 0; h < heads; h++) {
            int best = -1;
            double bestRel = Double.POSITIVE_INFINITY;
            for (int g = 0; g < heads; g++) {
                final int hh = h, gg = g;
                double rel = CellKernel.relL2Gather(r, k -> (k / d) * heads * d + (long) gg * d + k % d,
                        c, k -> (k / d) * heads * d + (long) hh * d + k % d, rows * d);
                if (rel < bestRel) { bestRel = rel; best = g; }
            }
            if (bestRel > near || used[best]) return null;
            used[best] = true;
            map[h] = best;
            if (best != h) identity = false;
        }
        if (identity) return null;
        return "heads permuted: candidate head h holds the reference's head " + Arrays.toString(map) + "[h]";
    }

    private static String swappedAxes(TensorView r, TensorView c, int d, double near) {
        long a = r.dim(0), b = r.elementCount() / a / d;
        if (a < 2 || b < 2) return null;
        double rel = CellKernel.relL2Gather(r, k -> k,
                c, k -> { long ai = k / (b * d), bi = (k / d) % b, di = k % d; return (bi * a + ai) * d + di; }, a * b * d);
        if (rel > near) return null;
        return "a layout transform: the candidate stores [" + b + ", " + a + ", " + d + "] (heads first) where the reference has ["
                + a + ", " + b + ", " + d + "] (rows first)";
    }

    // ------------------------------------------------------------------ formatting

    static long[] indexND(long[] shape, long flat) {
        var idx = new long[shape.length];
        long rem = Math.max(0, flat);
        for (int i = shape.length - 1; i >= 0; i--) {
            long d = Math.max(1, shape[i]);
            idx[i] = rem % d;
            rem /= d;
        }
        return idx;
    }

    static String fmt(double x) { return String.format(Locale.ROOT, "%.2e", x); }

    static String fmtFactor(double x) { return String.format(Locale.ROOT, Math.abs(x) >= 100 || Math.abs(x) < 0.01 ? "%.4g" : "%.4f", x).replaceAll("(\\.\\d*?)0+$", "$1").replaceAll("\\.$", ""); }

    static String fmtNorm(double x) { return String.format(Locale.ROOT, "%.2f", x); }
}
