package dev.decodiff.harness.arch.gemma4.bisect;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.Gemma4Config;
import dev.decodiff.engine.LayerType;
import dev.decodiff.engine.ops.Gemma4Ops;
import dev.decodiff.engine.ops.Precision;
import dev.decodiff.engine.ops.Rewire;
import dev.decodiff.harness.compare.detect.Detector;
import dev.decodiff.harness.compare.detect.DetectorContext;
import dev.decodiff.harness.compare.detect.Finding;
import dev.decodiff.metal.TensorView;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * For attn.out: recomputes attention with {@link Gemma4Ops#attention} from the reference's q and the keys and values
 * that entered its cache (every step up to this one), then under the mechanical variants of each part of it — the score scale at its closed-form
 * alternatives (also rounded to bfloat16), a soft-cap added, the mask (none, no causal mask in prefill, causal without
 * the sliding window, the window off by k), the softmax (an extra zero logit, not normalised), and the KV head a query head
 * reads (h mod nkv, named under "attention heads").
 */
final class AttentionVariantsDetector implements Detector, VariantSearch.Enumerator {
    static final String OP = "attention";
    /** The family the KV head mapping variant is named under. */
    static final String HEAD_MAPPING = "attention heads";
    private static final int MAX_WINDOW_SHIFT = 3;

    @Override public boolean appliesTo(String kind) { return kind.equals(CapturePoints.ATTN_OUT); }

    @Override
    public Finding explain(DetectorContext ctx) { return VariantSearch.best(ctx, hypotheses(ctx)); }

    /** The layer's attention recomputed from the reference's q and cached k/v under a rewiring, with its geometry; null where it cannot be. */
    record Recomputed(java.util.function.Function<Rewire, float[]> of, int T, int nh, int nkv, int d) {}

    static Recomputed recompute(DetectorContext ctx) {
        if (ctx.model() == null || ctx.history() == null || ctx.cell().shapeNote() != null) return null;
        Gemma4Config cfg = Gemma4Context.model(ctx).config();
        int layer = ctx.layer(), s = ctx.cell().step();
        var spec = cfg.layer(layer);
        String qn = CapturePoints.layer(layer, CapturePoints.Q);
        if (!ctx.ref().points().contains(qn)) return null;
        TensorView qt = ctx.ref().tensor(qn);
        if (qt.rank() != 3) return null;
        int T = (int) qt.dim(0), nh = (int) qt.dim(1), d = (int) qt.dim(2), nkv = spec.kvHeads();
        if (d != spec.headDim() || nkv < 1 || nh % nkv != 0 || nh != cfg.numHeads()) return null;
        int start = ctx.ref().start(), last = start + T - 1;
        float[] keys = rows(ctx, spec.kvSource(), CapturePoints.K, s, last, nkv * d);
        float[] values = rows(ctx, spec.kvSource(), CapturePoints.V, s, last, nkv * d);
        if (keys == null || values == null) return null;
        var ops = new Gemma4Ops(Gemma4Context.model(ctx));
        float[] q = qt.toFloats();
        boolean[] known = new boolean[last + 1];
        java.util.Arrays.fill(known, true);
        var kv = new Gemma4Ops.KeyValues(0, keys, values, known);
        return new Recomputed(r -> ops.attention(layer, q, T, start, kv, Precision.EXACT, r, null), T, nh, nkv, d);
    }

    @Override
    public VariantSearch.Hypotheses hypotheses(DetectorContext ctx) {
        var rc = recompute(ctx);
        if (rc == null) return null;
        var of = rc.of();
        var spec = Gemma4Context.model(ctx).config().layer(ctx.layer());
        int T = rc.T(), d = rc.d();
        var cfg = Gemma4Context.model(ctx).config();
        boolean sliding = spec.type() == LayerType.SLIDING;
        int W = cfg.slidingWindow();
        var variants = new ArrayList<VariantSearch.Variant>();
        for (var e : scales(d).entrySet()) {
            double sc = e.getValue();
            variants.add(new VariantSearch.Variant("the scores scaled by " + e.getKey(), () -> of.apply(Rewire.NONE.withScoreScale(sc))));
        }
        for (double cap : new double[]{50, 30, 20})
            variants.add(new VariantSearch.Variant("a soft-cap of " + (int) cap + " on the scores (cap·tanh(s/cap)), which Gemma 4 does not have",
                    () -> of.apply(Rewire.NONE.withScoreSoftcap(cap))));
        if (T > 1)
            variants.add(new VariantSearch.Variant("no causal mask in prefill (prompt rows also see the later prompt positions)",
                    () -> of.apply(Rewire.NONE.withMask(Rewire.Mask.NO_CAUSAL_IN_PREFILL))));
        variants.add(new VariantSearch.Variant("no mask at all (every row sees every position up to the step's last)",
                () -> of.apply(Rewire.NONE.withMask(Rewire.Mask.NONE))));
        if (sliding) {
            variants.add(new VariantSearch.Variant("a causal mask without the sliding window (a sliding layer attends to every earlier position)",
                    () -> of.apply(Rewire.NONE.withMask(Rewire.Mask.NO_WINDOW))));
            for (int k = -MAX_WINDOW_SHIFT; k <= MAX_WINDOW_SHIFT; k++) {
                if (k == 0 || W + k < 1) continue;
                int kk = k;
                variants.add(new VariantSearch.Variant("the sliding window off by " + (k > 0 ? "+" : "−") + Math.abs(k) + " (" + (W + k) + " keys where the model sees " + W + ")",
                        () -> of.apply(Rewire.NONE.withWindowShift(kk))));
            }
        }
        for (var w : List.of(Rewire.Wire.SOFTMAX_EXTRA_ZERO_LOGIT, Rewire.Wire.SOFTMAX_UNNORMALISED))
            variants.add(new VariantSearch.Variant(w.words(), () -> of.apply(Rewire.of(w))));
        // the grouped-query head mapping is scored against every other attention variant, named under its own family
        if (rc.nkv() > 1 && rc.nkv() < rc.nh())
            variants.add(new VariantSearch.Variant("h mod nkv (" + rc.nh() + " query heads, " + rc.nkv() + " KV heads: " + Rewire.Wire.KV_HEAD_MODULO.words() + ")",
                    () -> of.apply(Rewire.of(Rewire.Wire.KV_HEAD_MODULO)), HEAD_MAPPING));
        return new VariantSearch.Hypotheses(OP, of.apply(Rewire.NONE), variants);
    }

    /** Closed-form alternatives to Gemma 4's score scale of 1, and each rounded to bfloat16 where that differs. */
    static Map<String, Double> scales(int d) {
        var m = new LinkedHashMap<String, Double>();
        m.put("1/√d (d = " + d + ")", 1 / Math.sqrt(d));
        m.put("1/d (d = " + d + ")", 1.0 / d);
        m.put("√d (d = " + d + ")", Math.sqrt(d));
        m.put("1/√2", 1 / Math.sqrt(2));
        m.put("1/√(d/2) (d = " + d + ")", 1 / Math.sqrt(d / 2.0));
        var rounded = new LinkedHashMap<String, Double>();
        for (var e : m.entrySet()) {
            float f = (float) (double) e.getValue(), b = VariantSearch.bf16(f);
            if (b != f) rounded.put(e.getKey() + " rounded to bfloat16 (" + b + ")", (double) b);
        }
        m.putAll(rounded);
        return m;
    }

    /** The rows of attn.k / attn.v that entered the source layer's cache at steps 0…s, indexed by position; null if any is missing. */
    private static float[] rows(DetectorContext ctx, int src, String kind, int s, int last, int width) {
        var out = new float[last + 1][];
        var manifest = ctx.history().manifest();
        String point = CapturePoints.layer(src, kind);
        for (int t = 0; t <= s; t++) {
            float[] e = ctx.history().floats(t, point);
            if (e == null || e.length % width != 0) return null;
            int st = manifest.step(t).start();
            for (int j = 0; j < e.length / width && st + j <= last; j++)
                out[st + j] = java.util.Arrays.copyOfRange(e, j * width, (j + 1) * width);
        }
        float[] flat = new float[(last + 1) * width];
        for (int j = 0; j <= last; j++) {
            if (out[j] == null) return null;
            System.arraycopy(out[j], 0, flat, j * width, width);
        }
        return flat;
    }
}
