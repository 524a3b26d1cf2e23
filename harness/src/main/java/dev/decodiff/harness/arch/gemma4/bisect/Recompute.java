package dev.decodiff.harness.arch.gemma4.bisect;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.harness.compare.detect.DetectorContext;
import dev.decodiff.metal.TensorView;

/** Small recomputations from the reference's own tensors, in double precision, for bisect's model-aware detectors. */
final class Recompute {
    private Recompute() {}

    /** rel L2 of {@code a} against {@code t}'s values from {@code off}. */
    static double rel(float[] a, TensorView t, long off) {
        double n = 0, dd = 0;
        for (int i = 0; i < a.length; i++) {
            double x = t.getFloat(off + i), y = a[i] - x;
            n += y * y;
            dd += x * x;
        }
        return dd == 0 ? (n == 0 ? 0 : Double.POSITIVE_INFINITY) : Math.sqrt(n / dd);
    }

    /**
     * The reference's input to the cell's layer — the previous layer's out, or embed for layer 0 — as [T, H] floats;
     * null without the model, on a read window of another length, or when the reference lacks it.
     */
    static float[] layerInput(DetectorContext ctx) {
        if (ctx.model() == null || ctx.cell().shapeNote() != null) return null;
        int layer = ctx.layer();
        String input = layer == 0 ? CapturePoints.EMBED : CapturePoints.layer(layer - 1, CapturePoints.OUT);
        if (!ctx.ref().points().contains(input)) return null;
        float[] x = ctx.ref().tensor(input).toFloats();
        return x.length % Gemma4Context.model(ctx).config().hidden() == 0 ? x : null;
    }

    /** rel L2 of {@code got} against {@code want}. */
    static double rel(float[] got, float[] want) { return dev.decodiff.harness.compare.CellStats.relL2(got, want); }
}
