package dev.decodiff.harness.compare.detect;

import dev.decodiff.harness.arch.ArchitectureSupports;
import dev.decodiff.harness.compare.CellKernel;
import dev.decodiff.metal.TensorView;

/** The candidate reads a different number of positions (k_read/v_read of another length): which end lines up. */
final class ReadWindowLength implements Detector {
    static final String OP = "cache window";

    @Override public boolean appliesTo(String kind) { return true; }

    @Override
    public Finding explain(DetectorContext ctx) {
        if (ctx.cell().shapeNote() == null) return null;
        String shift = whichEnd(ctx.r(), ctx.c(), ctx.near());
        long rr = ctx.r().dim(0), cr = ctx.c().dim(0), k = cr - rr;
        String off = (Math.abs(k) == 1 ? "one" : Long.toString(Math.abs(k)));
        String detail = ctx.cell().shapeNote() + (shift != null ? "; " + shift : "") + ": the read window is off by " + off;
        int W = slidingWindow(ctx);
        // The reference reads every position so far (its window is not full yet) and the candidate fewer: the
        // candidate's window is cr keys, so its error is cr − W, which the short read alone understates.
        if (W > 0 && cr < rr && rr < W) {
            k = cr - W;
            detail += " (a window of " + cr + " keys where the model sees " + W + "; the reference's is not full yet)";
        }
        return Finding.variant(OP, "window off by " + (k > 0 ? "+" : "−") + Math.abs(k), detail);
    }

    /** W of the cell's layer when it is a sliding layer and the model is known (bisect), else 0. */
    private static int slidingWindow(DetectorContext ctx) {
        if (ctx.model() == null || ctx.layer() < 0) return 0;
        return ArchitectureSupports.of(ctx.model().architecture()).slidingWindow(ctx.model(), ctx.layer());
    }

    private static String whichEnd(TensorView r, TensorView c, double near) {
        if (r.rank() != c.rank() || r.rank() < 1) return null;
        long rr = r.dim(0), cr = c.dim(0), row = rr == 0 ? 0 : r.elementCount() / rr;
        long common = Math.min(rr, cr);
        if (common == 0 || row == 0) return null;
        // newest positions aligned (both end at p)
        double tail = CellKernel.relL2Rows(r, rr - common, c, cr - common, common, row);
        if (tail <= near) return cr > rr
                ? "its newest " + common + " positions match, it also reads " + (cr - rr) + " older one" + (cr - rr == 1 ? "" : "s")
                : "its " + common + " positions match the newest of the reference's, it misses " + (rr - cr) + " older one" + (rr - cr == 1 ? "" : "s");
        double head = CellKernel.relL2Rows(r, 0, c, 0, common, row);
        if (head <= near) return "its first " + common + " positions match, the window ends " + Math.abs(cr - rr) + " position" + (Math.abs(cr - rr) == 1 ? "" : "s") + (cr > rr ? " late" : " early");
        return null;
    }
}
