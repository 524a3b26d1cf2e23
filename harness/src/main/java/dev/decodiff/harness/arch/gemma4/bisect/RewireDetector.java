package dev.decodiff.harness.arch.gemma4.bisect;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.Gemma4Config;
import dev.decodiff.engine.ops.Gemma4Ops;
import dev.decodiff.engine.ops.OpGraph;
import dev.decodiff.engine.ops.Precision;
import dev.decodiff.engine.ops.Rewire;
import dev.decodiff.engine.ops.Rewire.Wire;
import dev.decodiff.harness.compare.detect.Detector;
import dev.decodiff.harness.compare.detect.DetectorContext;
import dev.decodiff.harness.compare.detect.Finding;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;

/**
 * Explains the culprit cell by rewiring its op in the op graph ({@link OpGraph}, {@link Gemma4Ops}): every
 * {@link Wire} of that op (a sub-op fed its neighbouring tensor, dropped, applied twice or moved across its
 * neighbour, a weight or scale taken from its neighbour; on mlp.out also the activation family, on q/k/v the norm
 * family, each named under its family), each input point replaced by the same point one layer
 * earlier, and the layer's weights replaced by the previous layer's of the same type — all recomputed from the
 * reference's inputs. The one that reproduces the candidate, by at least {@link VariantSearch#MIN_MARGIN}× over the
 * runner-up, names the bug in a porter's words; closer than that, both are listed and neither is named.
 */
final class RewireDetector implements Detector, VariantSearch.Enumerator {
    static final String OP = "rewiring";

    @Override
    public boolean appliesTo(String kind) {
        return switch (kind) {
            case CapturePoints.Q, CapturePoints.K, CapturePoints.V, CapturePoints.MLP_OUT, CapturePoints.MOE_OUT, CapturePoints.OUT,
                 CapturePoints.PLE -> true;
            default -> false;
        };
    }

    @Override
    public Finding explain(DetectorContext ctx) { return VariantSearch.best(ctx, hypotheses(ctx)); }

    /** The wires enumerated for a capture point's op on this layer (the norm ones of q/k/v are named under "norm"). */
    static List<Wire> wires(Gemma4Config cfg, String kind, int layer) {
        var out = new ArrayList<Wire>();
        switch (kind) {
            case CapturePoints.Q -> out.addAll(List.of(Wire.Q_NORM_TWICE, Wire.Q_ROPE_BEFORE_NORM));
            case CapturePoints.K -> out.addAll(List.of(Wire.K_NORM_TWICE, Wire.K_ROPE_BEFORE_NORM));
            case CapturePoints.V -> {
                if (cfg.layer(layer).kEqV()) out.addAll(List.of(Wire.V_AFTER_K_NORM, Wire.V_AFTER_K_ROPE));
            }
            case CapturePoints.MLP_OUT -> out.addAll(List.of(Wire.POST_ATTENTION_NORM_SKIPPED, Wire.PRE_FEEDFORWARD_NORM_SKIPPED, Wire.MLP_READS_LAYER_INPUT));
            case CapturePoints.MOE_OUT -> {
                for (var w : Wire.values()) if (w.op() == Rewire.Op.MOE) out.add(w);
                out.addAll(List.of(Wire.POST_ATTENTION_NORM_SKIPPED, Wire.MLP_READS_LAYER_INPUT));
            }
            case CapturePoints.OUT -> {
                out.add(Wire.POST_FEEDFORWARD_NORM_SKIPPED);
                out.add(Wire.LAYER_SCALAR_TWICE);
                if (cfg.hasPle())
                    out.addAll(List.of(Wire.LAYER_SCALAR_BEFORE_PLE, Wire.PLE_BRANCH_SKIPPED, Wire.PLE_BRANCH_BEFORE_MLP, Wire.PLE_POST_NORM_SKIPPED,
                            Wire.PLE_SLICE_LAYER_MAJOR));
                out.addAll(List.of(Wire.POST_ATTENTION_NORM_SKIPPED, Wire.MLP_READS_LAYER_INPUT));
            }
            case CapturePoints.PLE -> {
                for (var w : Wire.values()) if (w.op() == Rewire.Op.PLE) out.add(w);
            }
            default -> {}
        }
        return out;
    }

    /** The previous layer of the same type and geometry (its weights fit this layer's op), or -1. */
    static int previousSameType(Gemma4Config cfg, int layer) {
        var spec = cfg.layer(layer);
        for (int j = layer - 1; j >= 0; j--) {
            var o = cfg.layer(j);
            if (o.type() == spec.type() && o.headDim() == spec.headDim() && o.kvHeads() == spec.kvHeads() && o.kEqV() == spec.kEqV()
                    && o.kvShared() == spec.kvShared()) return j;
        }
        return -1;
    }

    @Override
    public VariantSearch.Hypotheses hypotheses(DetectorContext ctx) {
        if (ctx.model() == null || ctx.cell().shapeNote() != null) return null;
        var cfg = Gemma4Context.model(ctx).config();
        String kind = ctx.kind();
        int layer = ctx.layer();
        var ops = new Gemma4Ops(Gemma4Context.model(ctx));
        var variants = new ArrayList<VariantSearch.Variant>();
        Function<Rewire, float[]> op;
        if (kind.equals(CapturePoints.PLE)) {
            int[] tokens = tokens(ctx);
            float[] embed = floats(ctx, CapturePoints.EMBED);
            if (tokens == null || embed == null) return null;
            op = r -> ops.ple(tokens, embed, Precision.EXACT, r);
        } else {
            float[] x = Recompute.layerInput(ctx);
            if (x == null) return null;
            int T = x.length / cfg.hidden(), start = ctx.ref().start();
            var spec = cfg.layer(layer);
            switch (kind) {
                case CapturePoints.Q, CapturePoints.K, CapturePoints.V -> {
                    if (spec.kvShared() && !kind.equals(CapturePoints.Q)) return null;
                    op = r -> NormVariantsDetector.pick(ops.qkv(layer, x, T, start, Precision.EXACT, r), kind);
                    for (var w : NormVariantsDetector.wires(kind))
                        // on k_eq_v layers the value is the raw k projection: v_norm with k_norm's weights is the value taken after k_norm
                        if (!(w == Wire.V_NORM_K_WEIGHTS && spec.kEqV())) variants.add(new VariantSearch.Variant(w.words(), () -> op(ops, x, T, start, layer, kind, Rewire.of(w)), NormVariantsDetector.OP));
                    float[] prev = previousInput(ctx, layer);
                    if (prev != null)
                        variants.add(new VariantSearch.Variant(CapturePoints.layer(layer, kind) + " projects " + OpGraph.layerInput(layer - 1)
                                + " (the previous layer's input) instead of " + OpGraph.layerInput(layer),
                                () -> NormVariantsDetector.pick(ops.qkv(layer, prev, T, start, Precision.EXACT), kind)));
                }
                default -> {
                    float[] attn = floats(ctx, CapturePoints.layer(layer, CapturePoints.ATTN_OUT));
                    if (attn == null) return null;
                    switch (kind) {
                        case CapturePoints.MLP_OUT -> {
                            op = r -> ops.mlp(layer, ops.postAttention(layer, x, attn, T, Precision.EXACT, r), T, Precision.EXACT, r);
                            var fop = op;
                            for (var w : ActivationVariantsDetector.WIRES)
                                variants.add(new VariantSearch.Variant(w.words(), () -> fop.apply(Rewire.of(w)), ActivationVariantsDetector.OP));
                        }
                        case CapturePoints.MOE_OUT -> {
                            if (!cfg.moe()) return null;
                            op = r -> ops.moe(layer, ops.postAttention(layer, x, attn, T, Precision.EXACT, r), T, Precision.EXACT, r);
                        }
                        default -> {
                            float[] mlp = floats(ctx, CapturePoints.layer(layer, CapturePoints.MLP_OUT));
                            float[] moe = cfg.moe() ? floats(ctx, CapturePoints.layer(layer, CapturePoints.MOE_OUT)) : null;
                            float[] ple = cfg.hasPle() ? floats(ctx, CapturePoints.PLE) : null;
                            if (mlp == null || cfg.moe() && moe == null || cfg.hasPle() && ple == null) return null;
                            op = r -> ops.layerOut(layer, ops.postAttention(layer, x, attn, T, Precision.EXACT, r), mlp, moe, ple, T, Precision.EXACT, r);
                        }
                    }
                }
            }
            int prevLayer = previousSameType(cfg, layer);
            if (prevLayer >= 0) {
                String what = switch (kind) {
                    case CapturePoints.Q, CapturePoints.K, CapturePoints.V -> "projections and norms";
                    case CapturePoints.MOE_OUT -> "router and experts";
                    case CapturePoints.MLP_OUT -> "MLP";
                    default -> "post-feedforward norms, per-layer input weights and layer_scalar";
                };
                var fop = op;
                variants.add(new VariantSearch.Variant("layer " + layer + " uses layer " + prevLayer + "'s " + what,
                        () -> fop.apply(Rewire.NONE.withWeightsLayer(prevLayer))));
            }
        }
        for (var w : wires(cfg, kind, layer)) {
            var fop = op;
            variants.add(new VariantSearch.Variant(w.words(), () -> fop.apply(Rewire.of(w))));
        }
        return new VariantSearch.Hypotheses(OP, op.apply(Rewire.NONE), variants);
    }

    private static float[] op(Gemma4Ops ops, float[] x, int T, int start, int layer, String kind, Rewire r) {
        return NormVariantsDetector.pick(ops.qkv(layer, x, T, start, Precision.EXACT, r), kind);
    }

    /** The reference's input to the previous layer, for "this layer reads the previous layer's input". */
    private static float[] previousInput(DetectorContext ctx, int layer) {
        if (layer < 1) return null;
        float[] x = floats(ctx, OpGraph.layerInput(layer - 1));
        return x != null && x.length % Gemma4Context.model(ctx).config().hidden() == 0 ? x : null;
    }

    private static float[] floats(DetectorContext ctx, String point) {
        return ctx.ref().points().contains(point) ? ctx.ref().tensor(point).toFloats() : null;
    }

    private static int[] tokens(DetectorContext ctx) {
        if (ctx.history() == null) return null;
        var all = ctx.history().manifest().tokens();
        int start = ctx.ref().start(), n = ctx.ref().length();
        if (all == null || start + n > all.size()) return null;
        int[] t = new int[n];
        for (int i = 0; i < n; i++) t[i] = all.get(start + i);
        return t;
    }
}
