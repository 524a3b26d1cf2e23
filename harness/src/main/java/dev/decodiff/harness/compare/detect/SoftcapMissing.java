package dev.decodiff.harness.compare.detect;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.harness.compare.CellKernel;

/** Logits that the reference soft-caps and the candidate does not: reference ≈ cap·tanh(candidate/cap). */
final class SoftcapMissing implements Detector {
    @Override public boolean appliesTo(String kind) { return kind.equals(CapturePoints.LOGITS); }

    @Override
    public Finding explain(DetectorContext ctx) {
        var r = ctx.r();
        var c = ctx.c();
        long n = c.elementCount();
        double maxR = 0, maxC = 0;
        for (long i = 0; i < n; i++) {
            maxR = Math.max(maxR, Math.abs(r.getFloat(i)));
            maxC = Math.max(maxC, Math.abs(c.getFloat(i)));
        }
        if (!(maxC > maxR)) return null;
        double best = Double.POSITIVE_INFINITY, bestCap = 0;
        for (double cap = Math.max(1, Math.floor(maxR)); cap <= 200; cap += 0.5) {
            double num = 0, den = 0;
            for (long i = 0; i < n; i++) {
                double x = r.getFloat(i), y = cap * Math.tanh(c.getFloat(i) / cap);
                num += (y - x) * (y - x);
                den += x * x;
            }
            double rel = CellKernel.ratio(num, den);
            if (rel < best) { best = rel; bestCap = cap; }
        }
        if (best > ctx.near()) return null;
        String cap = Wording.plain(bestCap);
        return Finding.variant("final soft-cap", "removed", "the final soft-cap is missing: the reference's logits are " + cap + "·tanh(candidate / " + cap + ") (rel L2 " + Wording.sci(best) + ")");
    }
}
