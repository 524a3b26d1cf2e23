package dev.decodiff.harness.compare.detect;

/**
 * The candidate's tensor is all zeros while the reference's is not (a reference of zeros is refused before any cell
 * is judged): the producer stored a buffer it never wrote, or captured before the computation ran.
 */
final class AllZeros implements Detector {
    @Override public boolean appliesTo(String kind) { return true; }

    @Override
    public Finding explain(DetectorContext ctx) {
        if (ctx.cell().nonFinite() > 0 || ctx.cell().candNorm() != 0) return null;
        var c = ctx.c();
        if (c.elementCount() == 0) return null;
        return Finding.of("the candidate's " + ctx.point() + " is all zeros (" + c.elementCount()
                + " values): nothing was written there, or it was captured before it was computed");
    }
}
