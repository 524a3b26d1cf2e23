package dev.decodiff.harness.compare.detect;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.harness.compare.CellKernel;

/** Along the read axis of k_read/v_read, candidate row i holds the reference's position i±1. */
final class ReadWindowShift implements Detector {
    @Override public boolean appliesTo(String kind) { return CapturePoints.isCacheRead(kind); }

    @Override
    public Finding explain(DetectorContext ctx) {
        var r = ctx.r();
        var c = ctx.c();
        if (r.rank() < 1 || r.dim(0) < 2) return null;
        long rows = r.dim(0), row = r.elementCount() / rows;
        double plus = CellKernel.relL2Rows(r, 1, c, 0, rows - 1, row);   // candidate row i = reference row i+1
        double minus = CellKernel.relL2Rows(r, 0, c, 1, rows - 1, row);  // candidate row i = reference row i−1
        if (plus <= ctx.near() && plus <= minus)
            return Finding.of("off by one position: candidate row i holds the reference's position i+1 along the read axis (C) — the read window starts one position late");
        if (minus <= ctx.near())
            return Finding.of("off by one position: candidate row i holds the reference's position i−1 along the read axis (C) — the read window starts one position early");
        return null;
    }
}
