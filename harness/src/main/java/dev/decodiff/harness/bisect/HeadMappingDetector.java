package dev.decodiff.harness.bisect;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.harness.compare.detect.Detector;
import dev.decodiff.harness.compare.detect.DetectorContext;
import dev.decodiff.harness.compare.detect.Finding;
import dev.decodiff.metal.TensorView;

import java.util.Arrays;

/**
 * For attn.out: the KV head each query head's output matches when attention for the step's last position is
 * recomputed from the reference's own q, k_read and v_read; names a mapping other than h / (nh/nkv). Null when the
 * recomputation does not reproduce the reference (another attention scale or layout) or nothing fits.
 */
final class HeadMappingDetector implements Detector {
    @Override public boolean appliesTo(String kind) { return kind.equals(CapturePoints.ATTN_OUT); }

    @Override
    public Finding explain(DetectorContext ctx) {
        String p = ctx.point();
        var ref = ctx.ref();
        var cand = ctx.cand();
        double near = ctx.near();
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
            for (int h = 0; h < nh && all; h++) all = Recompute.rel(Recompute.head(q, k, v, T - 1, h, h / group, s, C, nh, nkv, d), rOut, outBase + (long) h * d) <= near;
            if (all) { scale = s; break; }
        }
        if (Double.isNaN(scale)) return null;
        int[] map = new int[nh];
        boolean standard = true;
        for (int h = 0; h < nh; h++) {
            map[h] = -1;
            for (int g = 0; g < nkv; g++) {
                if (Recompute.rel(Recompute.head(q, k, v, T - 1, h, g, scale, C, nh, nkv, d), cOut, outBase + (long) h * d) <= near) { map[h] = g; break; }
            }
            if (map[h] < 0) return null;
            if (map[h] != h / group) standard = false;
        }
        if (standard) return null;
        var expected = new int[nh];
        for (int h = 0; h < nh; h++) expected[h] = h / group;
        boolean modulo = true;
        for (int h = 0; h < nh; h++) modulo &= map[h] == h % nkv;
        return Finding.variant("attention heads", modulo ? "h mod nkv" : "another head mapping", "query heads read the wrong KV heads: recomputing the last position's attention from the reference's q, k_read and v_read, "
                + "candidate head h matches KV head " + Arrays.toString(map) + "[h] where h / (nh/nkv) gives " + Arrays.toString(expected)
                + (modulo ? " — it is h mod nkv (" + nh + " query heads, " + nkv + " KV heads)" : ""));
    }
}
