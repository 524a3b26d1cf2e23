package dev.decodiff.harness.bisect;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.harness.compare.CellStats;
import dev.decodiff.harness.dump.StepTensors;
import dev.decodiff.harness.report.Fmt;
import dev.decodiff.metal.TensorView;

import java.util.Arrays;

/**
 * Diagnoses that need the model or the attention math, which bisect has and compare does not: which KV head each query
 * head really read (recomputing the last position's attention from the reference's q, k_read and v_read), and a
 * constant factor on a layer's output that is its layer_scalar.
 */
final class ModelDiagnosis {
    private ModelDiagnosis() {}

    /**
     * For attn.out: the KV head each query head's output matches when attention for the step's last position is
     * recomputed from the reference's own q, k_read and v_read; names a mapping other than h / (nh/nkv). Null when the
     * recomputation does not reproduce the reference (another attention scale or layout) or nothing fits.
     */
    static String headMapping(CellStats cell, StepTensors ref, StepTensors cand, double near) {
        String p = cell.point();
        if (!CapturePoints.kindOf(p).equals(CapturePoints.ATTN_OUT)) return null;
        int layer = CapturePoints.layerOf(p);
        String qn = CapturePoints.layer(layer, CapturePoints.Q), kn = CapturePoints.layer(layer, CapturePoints.K_READ), vn = CapturePoints.layer(layer, CapturePoints.V_READ);
        if (!ref.points().containsAll(java.util.List.of(qn, kn, vn)) || !cand.points().contains(p)) return null;
        TensorView q = ref.tensor(qn), k = ref.tensor(kn), v = ref.tensor(vn), rOut = ref.tensor(p), cOut = cand.tensor(p);
        if (q.rank() != 3 || k.rank() != 3 || !Arrays.equals(k.shape(), v.shape()) || !Arrays.equals(rOut.shape(), cOut.shape())) return null;
        int T = (int) q.dim(0), nh = (int) q.dim(1), d = (int) q.dim(2), C = (int) k.dim(0), nkv = (int) k.dim(1);
        if (k.dim(2) != d || nkv < 1 || nh % nkv != 0 || rOut.elementCount() != (long) T * nh * d) return null;
        int group = nh / nkv;
        long outBase = (long) (T - 1) * nh * d;
        // Which scale reproduces the reference's own last row with the standard mapping?
        double scale = Double.NaN;
        for (double s : new double[]{1.0, 1.0 / Math.sqrt(d)}) {
            boolean all = true;
            for (int h = 0; h < nh && all; h++) all = rel(head(q, k, v, T - 1, h, h / group, s, C, nh, nkv, d), rOut, outBase + (long) h * d) <= near;
            if (all) { scale = s; break; }
        }
        if (Double.isNaN(scale)) return null;
        int[] map = new int[nh];
        boolean standard = true;
        for (int h = 0; h < nh; h++) {
            map[h] = -1;
            for (int g = 0; g < nkv; g++) {
                if (rel(head(q, k, v, T - 1, h, g, scale, C, nh, nkv, d), cOut, outBase + (long) h * d) <= near) { map[h] = g; break; }
            }
            if (map[h] < 0) return null;
            if (map[h] != h / group) standard = false;
        }
        if (standard) return null;
        var expected = new int[nh];
        for (int h = 0; h < nh; h++) expected[h] = h / group;
        boolean modulo = true;
        for (int h = 0; h < nh; h++) modulo &= map[h] == h % nkv;
        return "query heads read the wrong KV heads: recomputing the last position's attention from the reference's q, k_read and v_read, "
                + "candidate head h matches KV head " + Arrays.toString(map) + "[h] where h / (nh/nkv) gives " + Arrays.toString(expected)
                + (modulo ? " — it is h mod nkv (" + nh + " query heads, " + nkv + " KV heads)" : "");
    }

    /** Attention output of query head h at row t over KV head g: softmax(scale·q·k) · v. */
    private static float[] head(TensorView q, TensorView k, TensorView v, int t, int h, int g, double scale, int C, int nh, int nkv, int d) {
        double[] s = new double[C];
        double max = Double.NEGATIVE_INFINITY;
        long qo = ((long) t * nh + h) * d;
        for (int j = 0; j < C; j++) {
            long ko = ((long) j * nkv + g) * d;
            double dot = 0;
            for (int x = 0; x < d; x++) dot += (double) q.getFloat(qo + x) * k.getFloat(ko + x);
            s[j] = dot * scale;
            max = Math.max(max, s[j]);
        }
        double sum = 0;
        for (int j = 0; j < C; j++) sum += s[j] = Math.exp(s[j] - max);
        float[] out = new float[d];
        for (int j = 0; j < C; j++) {
            long vo = ((long) j * nkv + g) * d;
            for (int x = 0; x < d; x++) out[x] += (float) (s[j] / sum * v.getFloat(vo + x));
        }
        return out;
    }

    private static double rel(float[] a, TensorView t, long off) {
        double n = 0, dd = 0;
        for (int i = 0; i < a.length; i++) {
            double x = t.getFloat(off + i), y = a[i] - x;
            n += y * y;
            dd += x * x;
        }
        return dd == 0 ? (n == 0 ? 0 : Double.POSITIVE_INFINITY) : Math.sqrt(n / dd);
    }

    /**
     * For k_read / v_read: which position's row each wrong row of the read window really holds, searching every row
     * that entered the reading layer's cache in the reference (attn.k / attn.v of its KV source at steps 0…s) — the
     * pattern of a ring indexed wrongly, whose wrong rows come from positions outside the window. Null when every wrong
     * row is unlike anything that entered.
     */
    static String readRows(CellStats cell, ReferenceTensors refs, int s, StepTensors cand, Gemma4Model model, double near) {
        String kind = CapturePoints.kindOf(cell.point());
        boolean keys = kind.equals(CapturePoints.K_READ);
        if (!keys && !kind.equals(CapturePoints.V_READ) || cell.shapeNote() != null) return null;
        int layer = cell.layer();
        int src = model.config().layer(layer).kvSource();
        String entered = CapturePoints.layer(src, keys ? CapturePoints.K : CapturePoints.V);
        TensorView c = cand.tensor(cell.point());
        if (c.rank() != 3) return null;
        int C = (int) c.dim(0), row = (int) (c.elementCount() / C);
        var manifest = refs.reader().manifest();
        var rows = new java.util.TreeMap<Integer, float[]>();
        for (int t = 0; t <= s; t++) {
            float[] e = refs.floats(t, entered);
            if (e == null || e.length % row != 0) return null;
            int start = manifest.step(t).start();
            for (int j = 0; j < e.length / row; j++) rows.put(start + j, Arrays.copyOfRange(e, j * row, (j + 1) * row));
        }
        int last = manifest.step(s).end() - 1, first = last - C + 1;
        var parts = new java.util.ArrayList<String>();
        int wrong = 0, explained = 0;
        for (int j = 0; j < C; j++) {
            int p = first + j;
            float[] got = new float[row];
            for (int x = 0; x < row; x++) got[x] = c.getFloat((long) j * row + x);
            if (rows.containsKey(p) && rel(got, rows.get(p)) <= near) continue;
            wrong++;
            Integer holds = null;
            for (var e : rows.entrySet()) if (e.getKey() != p && rel(got, e.getValue()) <= near) { holds = e.getKey(); break; }
            if (holds == null) continue;
            explained++;
            if (parts.size() < 4) parts.add("position " + p + " holds position " + holds + "'s");
        }
        if (wrong == 0 || explained == 0) return null;
        return "in the read window of step " + s + " (positions " + first + "–" + last + "), " + String.join(", ", parts)
                + (explained > parts.size() ? ", …" : "") + " " + (keys ? "keys" : "values")
                + (explained < wrong ? " (" + (wrong - explained) + " more wrong rows match no position)" : "")
                + (wrong < C ? "; the other rows are right" : "")
                + ": rows are written to or read from the wrong cache slots";
    }

    private static double rel(float[] got, float[] want) {
        double n = 0, d = 0;
        for (int i = 0; i < got.length; i++) {
            double x = (double) got[i] - want[i];
            n += x * x;
            d += (double) want[i] * want[i];
        }
        return d == 0 ? (n == 0 ? 0 : Double.POSITIVE_INFINITY) : Math.sqrt(n / d);
    }

    /** For a layer's out off by a constant factor: names the factor when it is 1/layer_scalar (not applied) or layer_scalar (twice). */
    static String layerScalar(CellStats cell, Gemma4Model model) {
        if (!CapturePoints.kindOf(cell.point()).equals(CapturePoints.OUT) || cell.layer() < 0) return null;
        if (!(cell.refNorm() > 0) || Double.isNaN(cell.cosine()) || cell.cosine() < 0.999) return null;
        double alpha = cell.normRatio() * cell.cosine();
        double s = model.weights().layers().get(cell.layer()).layerScalar();
        if (s == 1 || s == 0) return null;
        if (Math.abs(alpha * s - 1) < 1e-3)
            return Fmt.num(alpha, 4) + " = 1 / layer_scalar (" + Fmt.num(s, 4) + ") of layer " + cell.layer() + ": the layer scalar is not applied";
        if (Math.abs(alpha / s - 1) < 1e-3)
            return Fmt.num(alpha, 4) + " = layer_scalar (" + Fmt.num(s, 4) + ") of layer " + cell.layer() + ": the layer scalar is applied twice";
        return null;
    }
}
