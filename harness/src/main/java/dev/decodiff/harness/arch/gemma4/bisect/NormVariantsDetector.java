package dev.decodiff.harness.arch.gemma4.bisect;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.ops.Gemma4Ops;
import dev.decodiff.engine.ops.Precision;
import dev.decodiff.engine.ops.Rewire;
import dev.decodiff.engine.ops.Rewire.Wire;
import dev.decodiff.harness.compare.detect.Detector;
import dev.decodiff.harness.compare.detect.DetectorContext;
import dev.decodiff.harness.compare.detect.Finding;

import java.util.ArrayList;
import java.util.List;

/**
 * For attn.q, attn.k and attn.v: recomputes the projection from the layer's input in the reference (the previous
 * layer's out, or embed) with {@link Gemma4Ops#qkv} and tries the norms' rewirings — input_layernorm absent or with
 * (1+w), the per-head norm (q_norm, k_norm, the scale-free v_norm) absent, with (1+w), or with the other norm's
 * weights.
 */
final class NormVariantsDetector implements Detector, VariantSearch.Enumerator {
    static final String OP = "norm";

    @Override
    public boolean appliesTo(String kind) {
        return kind.equals(CapturePoints.Q) || kind.equals(CapturePoints.K) || kind.equals(CapturePoints.V);
    }

    @Override
    public Finding explain(DetectorContext ctx) { return VariantSearch.best(ctx, hypotheses(ctx)); }

    /** The norm rewirings of the q, k or v projection, in the order they are tried. */
    static List<Wire> wires(String kind) {
        return switch (kind) {
            case CapturePoints.Q -> List.of(Wire.Q_NORM_SKIPPED, Wire.Q_NORM_ONE_PLUS, Wire.Q_NORM_K_WEIGHTS, Wire.INPUT_NORM_SKIPPED, Wire.INPUT_NORM_ONE_PLUS);
            case CapturePoints.K -> List.of(Wire.K_NORM_SKIPPED, Wire.K_NORM_ONE_PLUS, Wire.K_NORM_Q_WEIGHTS, Wire.INPUT_NORM_SKIPPED, Wire.INPUT_NORM_ONE_PLUS);
            default -> List.of(Wire.V_NORM_SKIPPED, Wire.V_NORM_K_WEIGHTS, Wire.INPUT_NORM_SKIPPED, Wire.INPUT_NORM_ONE_PLUS);
        };
    }

    @Override
    public VariantSearch.Hypotheses hypotheses(DetectorContext ctx) {
        float[] x = Recompute.layerInput(ctx);
        if (x == null) return null;
        var cfg = Gemma4Context.model(ctx).config();
        int layer = ctx.layer();
        if (cfg.layer(layer).kvShared() && !ctx.kind().equals(CapturePoints.Q)) return null;
        var ops = new Gemma4Ops(Gemma4Context.model(ctx));
        int T = x.length / cfg.hidden(), start = ctx.ref().start();
        String kind = ctx.kind();
        var variants = new ArrayList<VariantSearch.Variant>();
        for (var w : wires(kind))
            if (!(w == Wire.V_NORM_K_WEIGHTS && cfg.layer(layer).kEqV())) variants.add(new VariantSearch.Variant(w.words(), () -> pick(ops.qkv(layer, x, T, start, Precision.EXACT, Rewire.of(w)), kind)));
        return new VariantSearch.Hypotheses(OP, pick(ops.qkv(layer, x, T, start, Precision.EXACT), kind), variants);
    }

    static float[] pick(Gemma4Ops.Qkv qkv, String kind) {
        return switch (kind) {
            case CapturePoints.Q -> qkv.q();
            case CapturePoints.K -> qkv.k();
            default -> qkv.v();
        };
    }
}
