package dev.decodiff.harness.compare.detect;

import dev.decodiff.engine.CapturePoints;

/** The head size of a point with a head axis: [T, nh, d], [C, nkv, d], or attn.out [T, nh·d] using q's d; else -1. */
final class HeadAxis {
    private HeadAxis() {}

    static int headDim(DetectorContext ctx) {
        var r = ctx.r();
        String kind = ctx.kind();
        if (CapturePoints.hasHeadAxis(kind)) return r.rank() == 3 && r.dim(1) >= 2 ? (int) r.dim(2) : -1;
        if (kind.equals(CapturePoints.ATTN_OUT) && r.rank() == 2) {
            String q = CapturePoints.layer(ctx.layer(), CapturePoints.Q);
            if (ctx.ref().points().contains(q)) {
                var qs = ctx.ref().tensor(q).shape();
                if (qs.length == 3 && qs[1] >= 2 && qs[1] * qs[2] == r.dim(1)) return (int) qs[2];
            }
        }
        return -1;
    }

    static boolean applies(String kind) { return CapturePoints.hasHeadAxis(kind) || kind.equals(CapturePoints.ATTN_OUT); }
}
