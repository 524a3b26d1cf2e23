package dev.decodiff.harness.bisect;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.ops.Rewire;
import dev.decodiff.harness.compare.detect.Detector;
import dev.decodiff.harness.compare.detect.DetectorContext;
import dev.decodiff.harness.compare.detect.Finding;

import java.util.List;

/**
 * For attn.out: recomputes the layer's attention from the reference's q and cached keys and values (the op graph's
 * attention) with query head h reading KV head h mod nkv instead of h / (nh/nkv), the grouped-query mapping a port
 * written for nkv = nh gets wrong. Only where 1 &lt; nkv &lt; nh, so the two mappings differ.
 */
final class HeadMappingDetector implements Detector {
    static final String OP = "attention heads";

    @Override public boolean appliesTo(String kind) { return kind.equals(CapturePoints.ATTN_OUT); }

    @Override
    public Finding explain(DetectorContext ctx) {
        var rc = AttentionVariantsDetector.recompute(ctx);
        if (rc == null || rc.nkv() <= 1 || rc.nkv() >= rc.nh()) return null;
        var variant = new VariantSearch.Variant("h mod nkv (" + rc.nh() + " query heads, " + rc.nkv() + " KV heads: " + Rewire.Wire.KV_HEAD_MODULO.words() + ")",
                () -> rc.of().apply(Rewire.of(Rewire.Wire.KV_HEAD_MODULO)));
        return VariantSearch.best(OP, ctx, rc.of().apply(Rewire.NONE), List.of(variant));
    }
}
