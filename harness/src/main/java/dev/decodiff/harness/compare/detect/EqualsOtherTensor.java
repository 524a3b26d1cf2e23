package dev.decodiff.harness.compare.detect;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.harness.compare.CellKernel;

import java.util.ArrayList;
import java.util.Arrays;

/**
 * The candidate equals another reference tensor of the same step: another point of its layer (values == keys, q == k,
 * out == attn.out) or the same point of an earlier layer (a layer reading another's cache or repeating its result).
 */
final class EqualsOtherTensor implements Detector {
    @Override public boolean appliesTo(String kind) { return true; }

    @Override
    public Finding explain(DetectorContext ctx) {
        String p = ctx.point();
        var c = ctx.c();
        var ref = ctx.ref();
        int layer = ctx.layer();
        var candidates = new ArrayList<String>();
        for (String q : ref.points()) if (!q.equals(p) && CapturePoints.layerOf(q) == layer) candidates.add(q);
        if (layer >= 0) {
            for (int l = layer - 1; l >= 0; l--) {          // nearest earlier layers first
                String other = CapturePoints.layer(l, ctx.kind());
                if (ref.points().contains(other)) candidates.add(other);
            }
        }
        String best = null;
        double bestRel = Double.POSITIVE_INFINITY;
        for (String q : candidates) {
            var o = ref.tensor(q);
            if (!Arrays.equals(o.shape(), c.shape())) continue;
            double rel = CellKernel.relL2Gather(o, i -> i, c, i -> i, c.elementCount());
            if (rel <= ctx.near() && rel < bestRel) {
                bestRel = rel;
                best = q;
            }
        }
        if (best == null) return null;
        String how = bestRel == 0 ? "bit-identical to" : "equal to (rel L2 " + Wording.sci(bestRel) + ")";
        String head = "the candidate's " + p + " is " + how + " the reference's " + best;
        int ql = CapturePoints.layerOf(best);
        if (ql != layer) {
            boolean cache = CapturePoints.isCacheRead(ctx.kind());
            String what = cache ? "reads layer " + ql + "'s cache" : "repeats layer " + ql + "'s result";
            return Finding.variant(cache ? "kv source" : "layer wiring", "layer " + layer + " " + what, head + ": layer " + layer + " " + what);
        }
        return Wording.wired(head, ctx.kind(), CapturePoints.kindOf(best));
    }
}
