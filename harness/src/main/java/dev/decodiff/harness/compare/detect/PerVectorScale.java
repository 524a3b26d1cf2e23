package dev.decodiff.harness.compare.detect;

/**
 * Every vector along the last axis is the reference's times its own factor: a normalisation (RMSNorm of each head or
 * token) is missing or applied twice.
 */
final class PerVectorScale implements Detector {
    @Override public boolean appliesTo(String kind) { return true; }

    @Override
    public Finding explain(DetectorContext ctx) {
        var r = ctx.r();
        var c = ctx.c();
        double near = ctx.near();
        if (r.rank() < 2) return null;
        long d = r.dim(r.rank() - 1), vectors = r.elementCount() / Math.max(1, d);
        if (d < 2 || vectors < 2) return null;
        double lo = Double.POSITIVE_INFINITY, hi = Double.NEGATIVE_INFINITY;
        for (long v = 0; v < vectors; v++) {
            double rr = 0, cc = 0, cr = 0;
            for (long k = 0; k < d; k++) {
                double x = r.getFloat(v * d + k), y = c.getFloat(v * d + k);
                rr += x * x;
                cc += y * y;
                cr += x * y;
            }
            if (rr == 0 || cc == 0) return null;
            double cos = cr / Math.sqrt(rr * cc);
            if (Math.sqrt(Math.max(0, 1 - cos * cos)) > near) return null;
            double alpha = cr / rr;
            lo = Math.min(lo, alpha);
            hi = Math.max(hi, alpha);
        }
        if (hi - lo <= 10 * near * Math.max(1, Math.abs(hi))) return null; // a constant factor: ConstantScale covers that
        return Finding.of("each [" + d + "] vector of the candidate is the reference's times its own factor (" + Wording.factor(lo) + " to " + Wording.factor(hi)
                + "): a normalisation of each vector is missing or applied twice");
    }
}
