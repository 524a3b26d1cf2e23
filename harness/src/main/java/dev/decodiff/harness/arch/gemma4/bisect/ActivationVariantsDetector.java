package dev.decodiff.harness.arch.gemma4.bisect;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.ExactGelu;
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
 * For mlp.out: recomputes the dense MLP with {@link Gemma4Ops} from the reference's own inputs — the layer's input
 * (the previous layer's out, or embed), its attn.out through o_proj and the post-attention norm, then
 * pre_feedforward_layernorm — and tries the activation's siblings: exact (erf) GELU, SiLU, ReLU, none, and the gate
 * and up projections swapped.
 */
final class ActivationVariantsDetector implements Detector, VariantSearch.Enumerator {
    static final String OP = "mlp activation";

    static final List<Wire> WIRES = List.of(Wire.MLP_GELU_ERF, Wire.MLP_SILU, Wire.MLP_RELU, Wire.MLP_NO_ACTIVATION, Wire.MLP_GATE_UP_SWAPPED);

    @Override public boolean appliesTo(String kind) { return kind.equals(CapturePoints.MLP_OUT); }

    @Override
    public Finding explain(DetectorContext ctx) { return VariantSearch.best(ctx, hypotheses(ctx)); }

    @Override
    public VariantSearch.Hypotheses hypotheses(DetectorContext ctx) {
        float[] x = Recompute.layerInput(ctx);
        String attn = CapturePoints.layer(ctx.layer(), CapturePoints.ATTN_OUT);
        if (x == null || !ctx.ref().points().contains(attn)) return null;
        var cfg = Gemma4Context.model(ctx).config();
        int layer = ctx.layer(), H = cfg.hidden();
        float[] ao = ctx.ref().tensor(attn).toFloats();
        int T = x.length / H;
        if (ao.length != T * Gemma4Context.model(ctx).weights().layers().get(layer).o().cols()) return null;
        var ops = new Gemma4Ops(Gemma4Context.model(ctx));
        float[] residual = ops.postAttention(layer, x, ao, T, Precision.EXACT);
        var variants = new ArrayList<VariantSearch.Variant>();
        for (var w : WIRES) variants.add(new VariantSearch.Variant(w.words(), () -> ops.mlp(layer, residual, T, Precision.EXACT, Rewire.of(w))));
        return new VariantSearch.Hypotheses(OP, ops.mlp(layer, residual, T, Precision.EXACT), variants);
    }

    static double geluTanh(double x) { return 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x * x * x))); }

    static double geluErf(double x) { return ExactGelu.gelu(x); }

    static double erf(double z) { return ExactGelu.erf(z); }
}
