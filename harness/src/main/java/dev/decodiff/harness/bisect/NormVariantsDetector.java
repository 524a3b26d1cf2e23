package dev.decodiff.harness.bisect;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.LayerWeights;
import dev.decodiff.engine.Rope;
import dev.decodiff.harness.compare.detect.Detector;
import dev.decodiff.harness.compare.detect.DetectorContext;
import dev.decodiff.harness.compare.detect.Finding;
import dev.decodiff.metal.VectorMath;
import dev.decodiff.metal.WeightMatrix;

import java.util.ArrayList;

/**
 * For attn.q, attn.k and attn.v: recomputes the projection from the layer's input in the reference (the previous
 * layer's out, or embed) and tries the norms' mechanical variants — input_layernorm absent or with (1+w), the
 * per-head norm (q_norm, k_norm, the scale-free v_norm) absent, with (1+w), or with the other norm's weights.
 */
final class NormVariantsDetector implements Detector, VariantSearch.Enumerator {
    static final String OP = "norm";

    @Override
    public boolean appliesTo(String kind) {
        return kind.equals(CapturePoints.Q) || kind.equals(CapturePoints.K) || kind.equals(CapturePoints.V);
    }

    /** How a variant treats input_layernorm and the per-head norm: NONE absent, ONE_PLUS (1+w), OTHER the other norm's weights. */
    private enum Norm { STANDARD, NONE, ONE_PLUS, OTHER }

    @Override
    public Finding explain(DetectorContext ctx) { return VariantSearch.best(ctx, hypotheses(ctx)); }

    @Override
    public VariantSearch.Hypotheses hypotheses(DetectorContext ctx) {
        float[] x = Recompute.layerInput(ctx);
        if (x == null) return null;
        var cfg = ctx.model().config();
        int layer = ctx.layer(), H = cfg.hidden();
        var spec = cfg.layer(layer);
        if (spec.kvShared() && !ctx.kind().equals(CapturePoints.Q)) return null;
        int T = x.length / H, d = spec.headDim();
        var lw = ctx.model().weights().layers().get(layer);
        String kind = ctx.kind();
        boolean isQ = kind.equals(CapturePoints.Q), isV = kind.equals(CapturePoints.V);
        WeightMatrix proj = isQ ? lw.q() : isV && !spec.kEqV() ? lw.v() : lw.k();
        float[] bias = isQ ? lw.qBias() : isV && !spec.kEqV() ? lw.vBias() : lw.kBias();
        float[] own = isQ ? lw.qNorm() : isV ? null : lw.kNorm();
        float[] other = isQ || isV ? lw.kNorm() : lw.qNorm();
        Rope rope = isV ? null : new Rope(cfg.rope(spec.type()), d);
        String headNorm = isQ ? "q_norm" : isV ? "v_norm" : "k_norm";
        var in = new Inputs(x, T, H, d, cfg.rmsNormEps(), ctx.ref().start(), lw, proj, bias, own, other, rope);
        var variants = new ArrayList<VariantSearch.Variant>();
        variants.add(new VariantSearch.Variant(headNorm + " absent", () -> in.compute(Norm.STANDARD, Norm.NONE)));
        if (own != null) variants.add(new VariantSearch.Variant(headNorm + " with (1+w) where Gemma 4 uses w", () -> in.compute(Norm.STANDARD, Norm.ONE_PLUS)));
        if (other != null && (own == null || other != own))
            variants.add(new VariantSearch.Variant(headNorm + " with " + (isQ || isV ? "k_norm" : "q_norm") + "'s weights", () -> in.compute(Norm.STANDARD, Norm.OTHER)));
        variants.add(new VariantSearch.Variant("input_layernorm absent", () -> in.compute(Norm.NONE, Norm.STANDARD)));
        variants.add(new VariantSearch.Variant("input_layernorm with (1+w) where Gemma 4 uses w", () -> in.compute(Norm.ONE_PLUS, Norm.STANDARD)));
        return new VariantSearch.Hypotheses(OP, in.compute(Norm.STANDARD, Norm.STANDARD), variants);
    }

    private record Inputs(float[] x, int T, int H, int d, float eps, int start, LayerWeights lw, WeightMatrix proj,
                          float[] bias, float[] own, float[] other, Rope rope) {
        float[] compute(Norm input, Norm head) {
            float[] h = new float[T * H];
            float[] w = weights(lw.inputNorm(), input == Norm.ONE_PLUS ? Norm.ONE_PLUS : Norm.STANDARD, null);
            for (int t = 0; t < T; t++) {
                if (input == Norm.NONE) System.arraycopy(x, t * H, h, t * H, H);
                else VectorMath.rmsNorm(x, t * H, H, w, eps, h, t * H);
            }
            int width = proj.rows(), heads = width / d;
            float[] y = new float[T * width];
            proj.matmul(h, T, y);
            if (bias != null) for (int t = 0; t < T; t++) VectorMath.add(y, t * width, bias, 0, width);
            float[] hw = weights(own, head, other);
            for (int t = 0; t < T; t++) {
                if (head != Norm.NONE)
                    for (int k = 0; k < heads; k++) VectorMath.rmsNorm(y, t * width + k * d, d, hw, eps, y, t * width + k * d);
                if (rope != null) rope.apply(y, t * width, heads, start + t);
            }
            return y;
        }

        private static float[] weights(float[] w, Norm how, float[] other) {
            return switch (how) {
                case STANDARD, NONE -> w;
                case OTHER -> other;
                case ONE_PLUS -> {
                    if (w == null) yield null;
                    float[] p = new float[w.length];
                    for (int i = 0; i < w.length; i++) p[i] = 1 + w[i];
                    yield p;
                }
            };
        }
    }
}
