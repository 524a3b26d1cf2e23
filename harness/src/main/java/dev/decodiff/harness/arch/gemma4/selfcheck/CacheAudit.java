package dev.decodiff.harness.arch.gemma4.selfcheck;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.Gemma4Config;
import dev.decodiff.engine.LayerType;
import dev.decodiff.engine.Probe;
import dev.decodiff.harness.report.Fmt;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Audits the KV cache inside one run, with no reference: every read window (attn.k_read / attn.v_read, for the last
 * position p of a step) must span exactly the positions the layer's attention may see (p−W+1…p on sliding layers, 0…p
 * on full ones) and hold, row for row, the keys and values that entered the cache at those positions (attn.k /
 * attn.v of this layer, or of the layer a KV-shared layer reads per config.json). Remembers the first violation in
 * causal order and names what the wrong rows are when they are another row that entered the cache.
 */
final class CacheAudit implements Probe {
    private final Gemma4Config cfg;
    private final double tolerance;
    /** layer → position → row, for keys and values that entered the cache. */
    private final Map<Integer, Map<Integer, float[]>> keys = new HashMap<>(), values = new HashMap<>();
    private int step, start, length;
    int reads;
    int violations;
    Violation first;

    record Violation(int step, int position, String point, double relL2, String detail) {}

    CacheAudit(Gemma4Config cfg, double tolerance) {
        this.cfg = cfg;
        this.tolerance = tolerance;
    }

    @Override
    public boolean wants(String point) {
        String k = CapturePoints.kindOf(point);
        return k.equals(CapturePoints.K) || k.equals(CapturePoints.V) || CapturePoints.isCacheRead(k);
    }

    @Override
    public void beginStep(int step, int start, int length) {
        this.step = step;
        this.start = start;
        this.length = length;
    }

    @Override
    public float[] capture(String point, int[] shape, float[] data) {
        int layer = CapturePoints.layerOf(point);
        String kind = CapturePoints.kindOf(point);
        int rows = shape[0], width = data.length / Math.max(1, rows);
        switch (kind) {
            case CapturePoints.K, CapturePoints.V -> {
                var byPos = (kind.equals(CapturePoints.K) ? keys : values).computeIfAbsent(layer, l -> new HashMap<>());
                for (int t = 0; t < rows; t++) byPos.put(start + t, slice(data, t * width, width));
            }
            default -> audit(point, layer, kind.equals(CapturePoints.K_READ), rows, width, data);
        }
        return null;
    }

    private void audit(String point, int layer, boolean isKey, int rows, int width, float[] data) {
        reads++;
        var spec = cfg.layer(layer);
        int src = spec.kvSource(), p = start + length - 1;
        int expected = spec.type() == LayerType.SLIDING ? Math.min(cfg.slidingWindow(), p + 1) : p + 1;
        String what = isKey ? "keys" : "values";
        if (rows != expected) {
            fail(point, p, Double.POSITIVE_INFINITY, "the read window holds " + rows + " positions where a " + (spec.type() == LayerType.SLIDING
                    ? "sliding layer (window " + cfg.slidingWindow() + ")" : "full layer") + " sees " + expected + " at position " + p);
            return;
        }
        var entered = (isKey ? keys : values).get(src);
        var wrong = new ArrayList<Integer>();
        double num = 0, den = 0;
        for (int j = 0; j < rows; j++) {
            int q = p - rows + 1 + j;
            float[] e = entered == null ? null : entered.get(q);
            if (e == null || e.length != width) { wrong.add(q); num = Double.POSITIVE_INFINITY; continue; }
            double rn = 0, rd = 0;
            for (int x = 0; x < width; x++) {
                double d = (double) data[j * width + x] - e[x];
                rn += d * d;
                rd += (double) e[x] * e[x];
            }
            num += rn;
            den += rd;
            if (!(ratio(rn, rd) <= tolerance)) wrong.add(q);
        }
        if (wrong.isEmpty()) return;
        double rel = ratio(num, den);
        int q0 = wrong.get(0);
        float[] row0 = slice(data, (q0 - (p - rows + 1)) * width, width);
        fail(point, p, rel, "at position " + p + " the " + what + " read back for " + (wrong.size() == 1 ? "position " : "positions ")
                + Fmt.ranges(wrong, 0) + " are not the " + what + " that entered " + (src == layer ? "this layer's" : "layer " + src + "'s")
                + " cache there" + explain(row0, q0, isKey, src, layer));
    }

    /** What a wrong row is, when it is another row that entered a cache. */
    private String explain(float[] row, int q, boolean isKey, int src, int layer) {
        var other = (isKey ? values : keys).get(src);
        if (other != null && close(other.get(q), row))
            return isKey ? ": they are the values (the cache hands back values as keys)" : ": they are the keys (the cache hands back keys as values)";
        var same = (isKey ? keys : values).get(src);
        if (same != null)
            for (var e : same.entrySet())
                if (e.getKey() != q && close(e.getValue(), row))
                    return ": position " + q + "'s row holds position " + e.getKey() + "'s (rows are written to or read from the wrong cache slots)";
        for (var e : (isKey ? keys : values).entrySet())
            if (e.getKey() != src && close(e.getValue().get(q), row))
                return ": they are layer " + e.getKey() + "'s (the layer reads the wrong layer's cache; config.json says layer " + src + ")";
        return "";
    }

    private boolean close(float[] a, float[] b) {
        if (a == null || b == null || a.length != b.length) return false;
        double n = 0, d = 0;
        for (int i = 0; i < a.length; i++) {
            double x = (double) b[i] - a[i];
            n += x * x;
            d += (double) a[i] * a[i];
        }
        return ratio(n, d) <= tolerance;
    }

    private void fail(String point, int p, double rel, String detail) {
        violations++;
        if (first == null) first = new Violation(step, p, point, rel, detail);
    }

    private static float[] slice(float[] a, int off, int n) {
        var r = new float[n];
        System.arraycopy(a, off, r, 0, n);
        return r;
    }

    static double ratio(double n, double d) { return d == 0 ? (n == 0 ? 0 : Double.POSITIVE_INFINITY) : Math.sqrt(n / d); }

}
