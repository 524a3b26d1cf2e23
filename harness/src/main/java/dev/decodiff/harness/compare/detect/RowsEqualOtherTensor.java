package dev.decodiff.harness.compare.detect;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.harness.compare.CellKernel;
import dev.decodiff.harness.report.Fmt;

import java.util.ArrayList;
import java.util.Arrays;

/**
 * Row by row along axis 0 (positions for k_read/v_read, tokens elsewhere): some rows equal another reference tensor
 * of the same layer and the others are right — e.g. the values read back from the cache are the keys for every cached
 * position, while the newest position, computed in this very step, is correct.
 */
final class RowsEqualOtherTensor implements Detector {
    @Override public boolean appliesTo(String kind) { return true; }

    @Override
    public Finding explain(DetectorContext ctx) {
        var r = ctx.r();
        var c = ctx.c();
        if (r.rank() < 2 || r.dim(0) < 2) return null;
        String p = ctx.point();
        var ref = ctx.ref();
        double tol = ctx.cell().tolerance(), near = ctx.near();
        int layer = ctx.layer();
        long rows = r.dim(0), row = r.elementCount() / rows;
        for (String q : ref.points()) {
            if (q.equals(p) || CapturePoints.layerOf(q) != layer) continue;
            var o = ref.tensor(q);
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
            boolean positions = CapturePoints.isCacheRead(ctx.kind());
            long first = positions ? ref.start() + ref.length() - rows : ref.start();
            String which = (positions ? "positions " : "token positions ") + Fmt.ranges(equal, first);
            String rest = equal.size() == rows ? "" : " (its other rows are right)";
            return Wording.wired("at " + which + " the candidate's " + p + " is "
                    + (identical ? "bit-identical to" : "equal (rel L2 ≤ " + Wording.sci(worst) + ") to")
                    + " the reference's " + q + rest, ctx.kind(), CapturePoints.kindOf(q));
        }
        return null;
    }
}
