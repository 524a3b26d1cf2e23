package dev.decodiff.harness.arch.gemma4.bisect;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.Gemma4Config;
import dev.decodiff.engine.LayerType;
import dev.decodiff.engine.Rope;
import dev.decodiff.engine.RopeSpec;
import dev.decodiff.harness.compare.detect.Detector;
import dev.decodiff.harness.compare.detect.DetectorContext;
import dev.decodiff.harness.compare.detect.Finding;
import dev.decodiff.metal.TensorView;

import java.util.Locale;


/**
 * Names the RoPE bug behind a wrong attn.q / attn.k: the reference's rows are rotated back to the un-rotated
 * vector with the model's own tables (angle = fp32 position × inv_freq), then rotated again the way common bugs do,
 * and the hypothesis that reproduces the candidate is reported: a position off by one, adjacent-pair (interleaved)
 * rotation instead of rotate-half, or standard RoPE on a prefix of the head instead of proportional RoPE.
 */
final class RopeDetector implements Detector {
    @Override
    public boolean appliesTo(String kind) { return kind.equals(CapturePoints.Q) || kind.equals(CapturePoints.K); }

    private record Hypothesis(String name, String sentence, Rotation rotation) {}

    @FunctionalInterface
    private interface Rotation {
        void rotate(float[] x, int pos);
    }

    @Override
    public Finding explain(DetectorContext ctx) {
        if (ctx.model() == null) return null;
        var cell = ctx.cell();
        var ref = ctx.ref();
        var cand = ctx.cand();
        Gemma4Config config = Gemma4Context.model(ctx).config();
        double near = ctx.near();
        int layer = cell.layer();
        if (layer < 0 || !cand.points().contains(cell.point())) return null;
        TensorView r = ref.tensor(cell.point()), c = cand.tensor(cell.point());
        if (r.rank() != 3 || !java.util.Arrays.equals(r.shape(), c.shape())) return null;
        int T = (int) r.dim(0), heads = (int) r.dim(1), d = (int) r.dim(2);
        var type = config.layer(layer).type();
        RopeSpec spec = config.rope(type);
        if (d != config.layer(layer).headDim() || d % 2 != 0) return null;
        float[] inv = new Rope(spec, d).invFreq();
        int half = d / 2;
        var hypotheses = new java.util.ArrayList<Hypothesis>();
        hypotheses.add(new Hypothesis("position p+1", "rotated at position p+1 instead of p: the position fed to RoPE is off by one",
                (x, p) -> rotateHalf(x, inv, half, p + 1)));
        hypotheses.add(new Hypothesis("position p−1", "rotated at position p−1 instead of p: the position fed to RoPE is off by one",
                (x, p) -> rotateHalf(x, inv, half, p - 1)));
        hypotheses.add(new Hypothesis("interleaved pairs", "rotated in adjacent pairs (2j, 2j+1), the interleaved convention, where Gemma rotates (j, j+" + half + ")",
                (x, p) -> rotatePairs(x, inv, half, p, (j, h) -> new int[]{2 * j, 2 * j + 1})));
        if (spec.type().equals("proportional")) {
            int n = (int) Math.floor(spec.partialRotaryFactor() * d);
            if (n > 0 && n < d && n % 2 == 0) {
                float[] prefixInv = new Rope(RopeSpec.defaultRope(spec.theta()), n).invFreq();
                int rotated = (int) Math.floor(spec.partialRotaryFactor() * d / 2.0);
                hypotheses.add(new Hypothesis("standard RoPE on a prefix", "rotated with standard RoPE over its first " + n + " dims (pairs j, j+" + n / 2
                        + ", denominator " + n + ") where the " + (type == LayerType.FULL ? "full" : "sliding")
                        + " layer's proportional RoPE rotates pairs (j, j+" + half + ") for j < " + rotated + " (denominator " + d + ")",
                        (x, p) -> rotateHalf(x, prefixInv, n / 2, p)));
            }
        }
        float[] row = new float[d];
        for (var h : hypotheses) {
            double worst = 0;
            boolean moved = false;
            for (int t = 0; t < T && worst <= near; t++) {
                int pos = ref.start() + t;
                for (int k = 0; k < heads && worst <= near; k++) {
                    long off = ((long) t * heads + k) * d;
                    for (int i = 0; i < d; i++) row[i] = r.getFloat(off + i);
                    rotateHalf(row, inv, half, -pos); // back to the un-rotated vector
                    h.rotation().rotate(row, pos);
                    double num = 0, den = 0, diff = 0;
                    for (int i = 0; i < d; i++) {
                        double cv = c.getFloat(off + i);
                        num += (row[i] - cv) * (row[i] - cv);
                        den += cv * cv;
                        diff += Math.abs(cv - r.getFloat(off + i));
                    }
                    worst = Math.max(worst, den == 0 ? 0 : Math.sqrt(num / den));
                    moved |= diff > 0;
                }
            }
            if (worst <= near && moved) return Finding.variant("rope", h.name(), "the candidate's " + cell.point() + " is the reference's un-rotated vector " + h.sentence()
                    + " (reproduced to rel L2 ≤ " + String.format(Locale.ROOT, "%.1e", worst) + " at every row)");
        }
        return null;
    }

    private static void rotateHalf(float[] x, float[] inv, int half, int pos) {
        rotatePairs(x, inv, half, pos, (j, h) -> new int[]{j, j + h});
    }

    @FunctionalInterface
    private interface Pairing {
        int[] pair(int j, int half);
    }

    private static void rotatePairs(float[] x, float[] inv, int half, int pos, Pairing pairing) {
        float p = (float) pos;
        for (int j = 0; j < Math.min(half, inv.length); j++) {
            float angle = p * inv[j];
            if (angle == 0f) continue;
            float c = (float) StrictMath.cos(angle), s = (float) StrictMath.sin(angle);
            int[] ij = pairing.pair(j, half);
            float a = x[ij[0]], b = x[ij[1]];
            x[ij[0]] = a * c - b * s;
            x[ij[1]] = b * c + a * s;
        }
    }

}
