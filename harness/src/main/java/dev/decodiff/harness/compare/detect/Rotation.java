package dev.decodiff.harness.compare.detect;

import dev.decodiff.engine.CapturePoints;

/** Every [d] vector keeps the reference's norm but points elsewhere: RoPE at the wrong angle or on the wrong dims. */
final class Rotation implements Detector {
    @Override
    public boolean appliesTo(String kind) {
        return kind.equals(CapturePoints.Q) || kind.equals(CapturePoints.K) || kind.equals(CapturePoints.K_READ);
    }

    @Override
    public Finding explain(DetectorContext ctx) {
        var r = ctx.r();
        var c = ctx.c();
        if (r.rank() < 2) return null;
        long d = r.dim(r.rank() - 1), vectors = r.elementCount() / Math.max(1, d);
        int moved = 0;
        for (long v = 0; v < vectors; v++) {
            double rr = 0, cc = 0, dd = 0;
            for (long k = 0; k < d; k++) {
                double x = r.getFloat(v * d + k), y = c.getFloat(v * d + k);
                rr += x * x;
                cc += y * y;
                dd += (y - x) * (y - x);
            }
            if (rr == 0) continue;
            if (Math.abs(Math.sqrt(cc / rr) - 1) > ctx.near()) return null;
            if (Math.sqrt(dd / rr) > ctx.near()) moved++;
        }
        if (moved == 0) return null;
        return Finding.of(moved + " of " + vectors + " [" + d + "] vectors keep the reference's norm but point elsewhere: a rotation —"
                + " RoPE at the wrong position, with the wrong frequencies, or on the wrong dimensions");
    }
}
