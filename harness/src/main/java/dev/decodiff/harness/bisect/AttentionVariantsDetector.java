package dev.decodiff.harness.bisect;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.Gemma4Config;
import dev.decodiff.engine.LayerType;
import dev.decodiff.harness.compare.detect.Detector;
import dev.decodiff.harness.compare.detect.DetectorContext;
import dev.decodiff.harness.compare.detect.Finding;
import dev.decodiff.metal.TensorView;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * For attn.out: recomputes attention from the reference's q and the keys and values that entered its cache (every step
 * up to this one), then under the mechanical variants of each part of it — the score scale at its closed-form
 * alternatives (also rounded to bfloat16), a soft-cap added, the mask (none, no causal mask in prefill, causal without
 * the sliding window, the window off by k), and the softmax (an extra zero logit, not normalised).
 */
final class AttentionVariantsDetector implements Detector, VariantSearch.Enumerator {
    static final String OP = "attention";
    private static final int MAX_WINDOW_SHIFT = 3;

    @Override public boolean appliesTo(String kind) { return kind.equals(CapturePoints.ATTN_OUT); }

    /** Which keys row t (at position pos) sees: positions lo…hi inclusive. */
    @FunctionalInterface
    private interface Mask {
        int[] range(int pos, int last);
    }

    private enum Softmax { STANDARD, EXTRA_ZERO_LOGIT, UNNORMALISED }

    private record Spec(double scale, double softcap, Mask mask, Softmax softmax) {}

    @Override
    public Finding explain(DetectorContext ctx) { return VariantSearch.best(ctx, hypotheses(ctx)); }

    @Override
    public VariantSearch.Hypotheses hypotheses(DetectorContext ctx) {
        if (ctx.model() == null || ctx.history() == null || ctx.cell().shapeNote() != null) return null;
        Gemma4Config cfg = ctx.model().config();
        int layer = ctx.layer(), s = ctx.cell().step();
        var spec = cfg.layer(layer);
        String qn = CapturePoints.layer(layer, CapturePoints.Q);
        if (!ctx.ref().points().contains(qn)) return null;
        TensorView q = ctx.ref().tensor(qn);
        if (q.rank() != 3) return null;
        int T = (int) q.dim(0), nh = (int) q.dim(1), d = (int) q.dim(2), nkv = spec.kvHeads();
        if (d != spec.headDim() || nkv < 1 || nh % nkv != 0) return null;
        int start = ctx.ref().start(), last = start + T - 1;
        float[][] keys = rows(ctx, spec.kvSource(), CapturePoints.K, s, last, nkv * d);
        float[][] values = rows(ctx, spec.kvSource(), CapturePoints.V, s, last, nkv * d);
        if (keys == null || values == null) return null;
        // q·k for every row, head and position once; the variants differ only after it.
        double[][][] dots = new double[T][nh][last + 1];
        int group = nh / nkv;
        for (int t = 0; t < T; t++)
            for (int h = 0; h < nh; h++) {
                long qo = ((long) t * nh + h) * d;
                int g = h / group;
                for (int j = 0; j <= last; j++) {
                    double dot = 0;
                    for (int x = 0; x < d; x++) dot += (double) q.getFloat(qo + x) * keys[j][g * d + x];
                    dots[t][h][j] = dot;
                }
            }
        boolean sliding = spec.type() == LayerType.SLIDING;
        int W = cfg.slidingWindow();
        Mask standardMask = window(sliding ? W : Integer.MAX_VALUE);
        var base = new Spec(1.0, Double.NaN, standardMask, Softmax.STANDARD);
        var out = new Attention(dots, values, T, nh, d, group, start, last);
        var variants = new ArrayList<VariantSearch.Variant>();
        for (var e : scales(d).entrySet()) {
            double sc = e.getValue();
            variants.add(new VariantSearch.Variant("the scores scaled by " + e.getKey(), () -> out.of(new Spec(sc, Double.NaN, standardMask, Softmax.STANDARD))));
        }
        for (double cap : new double[]{50, 30, 20})
            variants.add(new VariantSearch.Variant("a soft-cap of " + (int) cap + " on the scores (cap·tanh(s/cap)), which Gemma 4 does not have",
                    () -> out.of(new Spec(1.0, cap, standardMask, Softmax.STANDARD))));
        if (T > 1)
            variants.add(new VariantSearch.Variant("no causal mask in prefill (prompt rows also see the later prompt positions)",
                    () -> out.of(new Spec(1.0, Double.NaN, (pos, l) -> new int[]{standardMask.range(pos, l)[0], l}, Softmax.STANDARD))));
        variants.add(new VariantSearch.Variant("no mask at all (every row sees every position up to the step's last)",
                () -> out.of(new Spec(1.0, Double.NaN, (pos, l) -> new int[]{0, l}, Softmax.STANDARD))));
        if (sliding) {
            variants.add(new VariantSearch.Variant("a causal mask without the sliding window (a sliding layer attends to every earlier position)",
                    () -> out.of(new Spec(1.0, Double.NaN, window(Integer.MAX_VALUE), Softmax.STANDARD))));
            for (int k = -MAX_WINDOW_SHIFT; k <= MAX_WINDOW_SHIFT; k++) {
                if (k == 0 || W + k < 1) continue;
                int kk = k;
                variants.add(new VariantSearch.Variant("the sliding window off by " + (k > 0 ? "+" : "−") + Math.abs(k) + " (" + (W + k) + " keys where the model sees " + W + ")",
                        () -> out.of(new Spec(1.0, Double.NaN, window(W + kk), Softmax.STANDARD))));
            }
        }
        variants.add(new VariantSearch.Variant("an extra zero logit in the softmax's denominator (an off-by-one softmax)",
                () -> out.of(new Spec(1.0, Double.NaN, standardMask, Softmax.EXTRA_ZERO_LOGIT))));
        variants.add(new VariantSearch.Variant("the softmax not normalised (exp(s − max) used as weights)",
                () -> out.of(new Spec(1.0, Double.NaN, standardMask, Softmax.UNNORMALISED))));
        return new VariantSearch.Hypotheses(OP, out.of(base), variants);
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

    private static Mask window(int w) {
        return (pos, l) -> new int[]{w == Integer.MAX_VALUE ? 0 : Math.max(0, pos - w + 1), pos};
    }

    /** The rows of attn.k / attn.v that entered the source layer's cache at steps 0…s, indexed by position; null if any is missing. */
    private static float[][] rows(DetectorContext ctx, int src, String kind, int s, int last, int width) {
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
        for (var r : out) if (r == null) return null;
        return out;
    }

    /** Attention outputs [T, nh·d] from precomputed q·k under one spec, in double. */
    private record Attention(double[][][] dots, float[][] values, int T, int nh, int d, int group, int start, int last) {
        float[] of(Spec spec) {
            float[] out = new float[T * nh * d];
            double[] acc = new double[d];
            for (int t = 0; t < T; t++) {
                int[] range = spec.mask().range(start + t, last);
                int lo = range[0], hi = Math.min(range[1], last);
                for (int h = 0; h < nh; h++) {
                    double[] sc = new double[hi - lo + 1];
                    double max = Double.NEGATIVE_INFINITY;
                    for (int j = lo; j <= hi; j++) {
                        double x = dots[t][h][j] * spec.scale();
                        if (!Double.isNaN(spec.softcap())) x = spec.softcap() * Math.tanh(x / spec.softcap());
                        sc[j - lo] = x;
                        max = Math.max(max, x);
                    }
                    double sum = spec.softmax() == Softmax.EXTRA_ZERO_LOGIT ? Math.exp(-max) : 0;
                    for (int j = 0; j < sc.length; j++) sum += sc[j] = Math.exp(sc[j] - max);
                    if (spec.softmax() == Softmax.UNNORMALISED) sum = 1;
                    java.util.Arrays.fill(acc, 0);
                    int g = h / group;
                    for (int j = lo; j <= hi; j++) {
                        double p = sc[j - lo] / sum;
                        float[] v = values[j];
                        for (int x = 0; x < d; x++) acc[x] += p * v[g * d + x];
                    }
                    for (int x = 0; x < d; x++) out[(t * nh + h) * d + x] = (float) acc[x];
                }
            }
            return out;
        }
    }
}
