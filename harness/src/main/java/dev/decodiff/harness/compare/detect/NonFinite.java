package dev.decodiff.harness.compare.detect;

import dev.decodiff.harness.compare.CellStats;

import java.util.Arrays;

/** The candidate holds NaN or Inf: where the first one is. */
final class NonFinite implements Detector {
    @Override public boolean appliesTo(String kind) { return true; }

    @Override
    public Finding explain(DetectorContext ctx) {
        var cell = ctx.cell();
        if (cell.nonFinite() == 0) return null;
        var c = ctx.c();
        long first = -1, n = c.elementCount();
        for (long i = 0; i < n; i++) if (!Float.isFinite(c.getFloat(i))) { first = i; break; }
        return Finding.of("the candidate has " + cell.nonFinite() + " NaN/Inf value" + (cell.nonFinite() == 1 ? "" : "s")
                + " (first at " + Arrays.toString(CellStats.indexND(c.shape(), first)) + " = " + c.getFloat(first) + ")");
    }
}
