package dev.decodiff.harness.bisect;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.ExactGelu;
import dev.decodiff.harness.compare.detect.Detector;
import dev.decodiff.harness.compare.detect.DetectorContext;
import dev.decodiff.harness.compare.detect.Finding;
import dev.decodiff.metal.VectorMath;
import dev.decodiff.metal.WeightMatrix;

import java.util.ArrayList;
import java.util.function.DoubleBinaryOperator;

/**
 * For mlp.out: recomputes the dense MLP from the reference's own inputs — the layer's input (the previous layer's out,
 * or embed), its attn.out through o_proj and the post-attention norm, then pre_feedforward_layernorm — and tries the
 * activation's siblings: exact (erf) GELU, SiLU, ReLU, none, and the gate and up projections swapped.
 */
final class ActivationVariantsDetector implements Detector, VariantSearch.Enumerator {
    static final String OP = "mlp activation";

    @Override public boolean appliesTo(String kind) { return kind.equals(CapturePoints.MLP_OUT); }

    @Override
    public Finding explain(DetectorContext ctx) { return VariantSearch.best(ctx, hypotheses(ctx)); }

    @Override
    public VariantSearch.Hypotheses hypotheses(DetectorContext ctx) {
        float[] x = Recompute.layerInput(ctx);
        String attn = CapturePoints.layer(ctx.layer(), CapturePoints.ATTN_OUT);
        if (x == null || !ctx.ref().points().contains(attn)) return null;
        var cfg = ctx.model().config();
        int layer = ctx.layer(), H = cfg.hidden();
        float[] ao = ctx.ref().tensor(attn).toFloats();
        int T = x.length / H;
        var lw = ctx.model().weights().layers().get(layer);
        if (ao.length != T * lw.o().cols()) return null;
        float eps = cfg.rmsNormEps();
        float[] a = new float[T * H];
        lw.o().matmul(ao, T, a);
        if (lw.oBias() != null) for (int t = 0; t < T; t++) VectorMath.add(a, t * H, lw.oBias(), 0, H);
        float[] h = new float[T * H];
        for (int t = 0; t < T; t++) {
            VectorMath.rmsNorm(a, t * H, H, lw.postAttentionNorm(), eps, a, t * H);
            for (int j = 0; j < H; j++) x[t * H + j] += a[t * H + j];
            VectorMath.rmsNorm(x, t * H, H, lw.preFeedforwardNorm(), eps, h, t * H);
        }
        int I = lw.gate().rows();
        float[] g = new float[T * I], u = new float[T * I];
        lw.gate().matmul(h, T, g);
        lw.up().matmul(h, T, u);
        var variants = new ArrayList<VariantSearch.Variant>();
        variants.add(new VariantSearch.Variant("exact (erf) GELU instead of gelu_pytorch_tanh", () -> mlp(lw.down(), g, u, T, (gg, uu) -> geluErf(gg) * uu)));
        variants.add(new VariantSearch.Variant("SiLU instead of gelu_pytorch_tanh", () -> mlp(lw.down(), g, u, T, (gg, uu) -> gg / (1 + Math.exp(-gg)) * uu)));
        variants.add(new VariantSearch.Variant("ReLU instead of gelu_pytorch_tanh", () -> mlp(lw.down(), g, u, T, (gg, uu) -> Math.max(0, gg) * uu)));
        variants.add(new VariantSearch.Variant("no activation (gate · up)", () -> mlp(lw.down(), g, u, T, (gg, uu) -> gg * uu)));
        variants.add(new VariantSearch.Variant("the gate and up projections swapped (the activation on up)", () -> mlp(lw.down(), g, u, T, (gg, uu) -> geluTanh(uu) * gg)));
        return new VariantSearch.Hypotheses(OP, mlp(lw.down(), g, u, T, (gg, uu) -> geluTanh(gg) * uu), variants);
    }

    private static float[] mlp(WeightMatrix down, float[] g, float[] u, int T, DoubleBinaryOperator act) {
        float[] m = new float[g.length];
        for (int j = 0; j < m.length; j++) m[j] = (float) act.applyAsDouble(g[j], u[j]);
        float[] out = new float[T * down.rows()];
        down.matmul(m, T, out);
        return out;
    }

    static double geluTanh(double x) { return 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x * x * x))); }

    static double geluErf(double x) { return ExactGelu.gelu(x); }

    static double erf(double z) { return ExactGelu.erf(z); }
}
