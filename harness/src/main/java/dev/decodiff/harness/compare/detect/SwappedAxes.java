package dev.decodiff.harness.compare.detect;

import dev.decodiff.harness.compare.CellKernel;

/** The candidate stores [heads, rows, d] where the reference has [rows, heads, d]: a layout transform. */
final class SwappedAxes implements Detector {
    @Override public boolean appliesTo(String kind) { return HeadAxis.applies(kind); }

    @Override
    public Finding explain(DetectorContext ctx) {
        int d = HeadAxis.headDim(ctx);
        if (d <= 0) return null;
        var r = ctx.r();
        long a = r.dim(0), b = r.elementCount() / a / d;
        if (a < 2 || b < 2) return null;
        double rel = CellKernel.relL2Gather(r, k -> k,
                ctx.c(), k -> { long ai = k / (b * d), bi = (k / d) % b, di = k % d; return (bi * a + ai) * d + di; }, a * b * d);
        if (rel > ctx.near()) return null;
        return Finding.of("a layout transform: the candidate stores [" + b + ", " + a + ", " + d + "] (heads first) where the reference has ["
                + a + ", " + b + ", " + d + "] (rows first)");
    }
}
