package dev.decodiff.harness.compare.detect;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.harness.compare.CellKernel;
import dev.decodiff.harness.report.Fmt;

import java.util.ArrayList;

/**
 * Rows of the read window that are all zeros where the reference's are not, the other rows right: those positions
 * were never written to the cache (a write loop that stops one short, a slot allocated but not filled).
 */
final class UnwrittenRows implements Detector {
    static final String OP = "cache read";

    @Override public boolean appliesTo(String kind) { return CapturePoints.isCacheRead(kind); }

    @Override
    public Finding explain(DetectorContext ctx) {
        var r = ctx.r();
        var c = ctx.c();
        if (r.rank() < 2 || r.dim(0) < 1) return null;
        long rows = r.dim(0), row = r.elementCount() / rows;
        var zero = new ArrayList<Long>();
        for (long j = 0; j < rows; j++) {
            boolean allZero = true, refZero = true;
            for (long x = 0; x < row; x++) {
                allZero &= c.getFloat(j * row + x) == 0f;
                refZero &= r.getFloat(j * row + x) == 0f;
            }
            if (allZero && !refZero) zero.add(j);
            else if (CellKernel.relL2Rows(r, j, c, j, 1, row) > ctx.cell().tolerance()) return null;
        }
        if (zero.isEmpty()) return null;
        long first = ctx.ref().start() + ctx.ref().length() - rows;
        String which = Fmt.ranges(zero, first);
        return Finding.variant(OP, "a row never written", "the candidate's " + ctx.point() + " is all zeros at position"
                + (zero.size() == 1 ? " " : "s ") + which + " and right elsewhere: " + (zero.size() == 1 ? "that position was" : "those positions were")
                + " never written to the cache");
    }
}
