package dev.decodiff.harness.arch.gemma4.bisect;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.harness.compare.detect.Detector;
import dev.decodiff.harness.compare.detect.DetectorContext;
import dev.decodiff.harness.compare.detect.Finding;
import dev.decodiff.metal.TensorView;

import java.util.Arrays;

/**
 * For k_read / v_read: which position's row each wrong row of the read window really holds, searching every row
 * that entered the reading layer's cache in the reference (attn.k / attn.v of its KV source at steps 0…s) — the
 * pattern of a ring indexed wrongly, whose wrong rows come from positions outside the window. Null when every wrong
 * row is unlike anything that entered.
 */
final class CacheSlotsDetector implements Detector {
    @Override public boolean appliesTo(String kind) { return CapturePoints.isCacheRead(kind); }

    @Override
    public Finding explain(DetectorContext ctx) {
        var cell = ctx.cell();
        if (ctx.model() == null || ctx.history() == null) return null;
        String kind = ctx.kind();
        var refs = ctx.history();
        int s = cell.step();
        double near = ctx.near();
        var model = Gemma4Context.model(ctx);
        boolean keys = kind.equals(CapturePoints.K_READ);
        if (!keys && !kind.equals(CapturePoints.V_READ) || cell.shapeNote() != null) return null;
        int layer = cell.layer();
        int src = model.config().layer(layer).kvSource();
        String entered = CapturePoints.layer(src, keys ? CapturePoints.K : CapturePoints.V);
        TensorView c = ctx.c();
        if (c.rank() != 3) return null;
        int C = (int) c.dim(0), row = (int) (c.elementCount() / C);
        var manifest = refs.manifest();
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
            if (rows.containsKey(p) && Recompute.rel(got, rows.get(p)) <= near) continue;
            wrong++;
            Integer holds = null;
            for (var e : rows.entrySet()) if (e.getKey() != p && Recompute.rel(got, e.getValue()) <= near) { holds = e.getKey(); break; }
            if (holds == null) continue;
            explained++;
            if (parts.size() < 4) parts.add("position " + p + " holds position " + holds + "'s");
        }
        if (wrong == 0 || explained == 0) return null;
        return Finding.variant("cache slots", "rows in the wrong slots", "in the read window of step " + s + " (positions " + first + "–" + last + "), " + String.join(", ", parts)
                + (explained > parts.size() ? ", …" : "") + " " + (keys ? "keys" : "values")
                + (explained < wrong ? " (" + (wrong - explained) + " more wrong rows match no position)" : "")
                + (wrong < C ? "; the other rows are right" : "")
                + ": rows are written to or read from the wrong cache slots");
    }
}
