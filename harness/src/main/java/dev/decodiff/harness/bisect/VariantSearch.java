package dev.decodiff.harness.bisect;

import dev.decodiff.harness.compare.detect.DetectorContext;
import dev.decodiff.harness.compare.detect.Finding;
import dev.decodiff.harness.report.Fmt;
import dev.decodiff.metal.TensorView;

import java.util.List;
import java.util.function.Supplier;

/**
 * The shared method of the op-variant detectors: recompute one operation from the reference's own inputs, first as
 * the model defines it (which must reproduce the reference's output, else nothing is claimed), then under each
 * variant; the variant that reproduces the candidate — rel L2 to the candidate within "near" and at most a tenth of the
 * candidate's distance to the reference (so it is also far from the reference: a small bug, an exact-vs-tanh GELU at
 * 1.5× the tolerance, is still named) — names the bug.
 */
final class VariantSearch {
    private VariantSearch() {}

    /** One way to get the op wrong: its name ("scale 1/√d") and its output recomputed from the reference's inputs. */
    record Variant(String name, Supplier<float[]> output) {}

    /** An op recomputed from the reference's inputs as the model defines it, and its enumerated variants. */
    record Hypotheses(String op, float[] standard, List<Variant> variants) {}

    /** A detector that enumerates an op's variants for a cell (null when the op cannot be recomputed there). */
    interface Enumerator extends dev.decodiff.harness.compare.detect.Detector {
        Hypotheses hypotheses(DetectorContext ctx);
    }

    static Finding best(DetectorContext ctx, Hypotheses h) {
        return h == null ? null : best(h.op(), ctx, h.standard(), h.variants());
    }

    static Finding best(String op, DetectorContext ctx, float[] standard, List<Variant> variants) {
        TensorView ref = ctx.r(), cand = ctx.c();
        if (standard == null || standard.length != ref.elementCount() || cand.elementCount() != ref.elementCount()) return null;
        double near = ctx.near();
        if (Recompute.rel(standard, ref, 0) > near) return null;
        double distance = ctx.cell().relL2();
        Variant best = null;
        double bestRel = Double.POSITIVE_INFINITY;
        for (var v : variants) {
            float[] out = v.output().get();
            if (out == null) continue;
            double rel = Recompute.rel(out, cand, 0);
            if (rel <= near && rel * 10 <= distance && rel < bestRel) {
                best = v;
                bestRel = rel;
            }
        }
        if (best == null) return null;
        return Finding.variant(op, best.name(), "recomputing " + op + " from the reference's inputs with " + best.name()
                + " reproduces the candidate's " + ctx.point() + " (rel L2 " + Fmt.sci(bestRel) + ", against " + Fmt.sci(distance)
                + " from the reference)");
    }

    /** Round to the nearest bfloat16 (ties to even), as a scale stored in the weight dtype would be. */
    static float bf16(float x) {
        int b = Float.floatToRawIntBits(x);
        b += 0x7FFF + ((b >>> 16) & 1);
        return Float.intBitsToFloat(b & 0xFFFF0000);
    }
}
