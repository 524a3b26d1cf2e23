package dev.decodiff.harness.compare.detect;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.harness.compare.CellKernel;

import java.util.ArrayList;

/** The rows of a read window hold reference positions in another order (a ring buffer indexed wrongly). */
final class ReadWindowOrder implements Detector {
    static final String OP = "cache slots";

    @Override public boolean appliesTo(String kind) { return CapturePoints.isCacheRead(kind); }

    @Override
    public Finding explain(DetectorContext ctx) {
        var r = ctx.r();
        var c = ctx.c();
        double near = ctx.near();
        if (r.rank() < 1 || r.dim(0) < 2) return null;
        long rows = r.dim(0), row = r.elementCount() / rows;
        if (rows > 4096) return null;
        long first = ctx.ref().start() + ctx.ref().length() - rows;
        var holds = new long[(int) rows];
        int misplaced = 0, foreign = 0;
        for (long j = 0; j < rows; j++) {
            holds[(int) j] = -1;
            if (CellKernel.relL2Rows(r, j, c, j, 1, row) <= near) { holds[(int) j] = j; continue; }
            for (long i = 0; i < rows; i++) {
                if (i != j && CellKernel.relL2Rows(r, i, c, j, 1, row) <= near) { holds[(int) j] = i; break; }
            }
            if (holds[(int) j] < 0) foreign++;
            else misplaced++;
        }
        if (misplaced == 0) return null;
        var sb = new StringBuilder("the read window is in the wrong order: ");
        var parts = new ArrayList<String>();
        for (int j = 0; j < rows; j++) {
            if (holds[j] == j) continue;
            parts.add("row " + j + " (position " + (first + j) + ") holds " + (holds[j] < 0 ? "no position of the window" : "position " + (first + holds[j])));
            if (parts.size() == 4) break;
        }
        sb.append(String.join(", ", parts));
        if (misplaced + foreign > parts.size()) sb.append(", …");
        // Two rows holding one position: two positions were written to one slot, the later overwriting the earlier.
        var seen = new java.util.HashMap<Long, Integer>();
        String collision = null;
        for (int j = 0; j < rows && collision == null; j++) {
            if (holds[j] < 0) continue;
            Integer other = seen.putIfAbsent(holds[j], j);
            if (other != null) collision = "the rows of positions " + (first + other) + " and " + (first + j) + " both hold position " + (first + holds[j]);
        }
        if (collision != null) {
            sb.append(" — ").append(collision).append(": positions collide in one cache slot");
            return Finding.variant(OP, "positions colliding in one slot", sb.toString());
        }
        sb.append(foreign > 0 ? " — positions are written to or read from the wrong cache slots" : " — the cache slots are read in the wrong order");
        return Finding.variant(OP, foreign > 0 ? "rows in the wrong slots" : "rows out of order", sb.toString());
    }
}
