package dev.decodiff.harness.arch.gemma4.bisect;

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
    record Variant(String name, Supplier<float[]> output, String op) {
        Variant(String name, Supplier<float[]> output) { this(name, output, null); }

        /** The op this variant is named under: its own where it has one, else the search's. */
        String opOr(String search) { return op != null ? op : search; }
    }

    /** An op recomputed from the reference's inputs as the model defines it, and its enumerated variants. */
    record Hypotheses(String op, float[] standard, List<Variant> variants) {}

    /** A detector that enumerates an op's variants for a cell (null when the op cannot be recomputed there). */
    interface Enumerator extends dev.decodiff.harness.compare.detect.Detector {
        Hypotheses hypotheses(DetectorContext ctx);
    }

    static Finding best(DetectorContext ctx, Hypotheses h) {
        return h == null ? null : best(h.op(), ctx, h.standard(), h.variants());
    }

    /** A variant that reproduces the candidate must beat every other enumerated variant by this factor to be named. */
    static final double MIN_MARGIN = 10;

    /** One variant's distance to the candidate. */
    record Scored(Variant variant, double rel) {}

    /**
     * The variant that reproduces the candidate, named only when its rel L2 to the candidate is at least
     * {@link #MIN_MARGIN}× under the runner-up's; otherwise "two explanations fit" with both, and no name. A variant
     * that equals the op as defined on this input (it changes nothing here) is no explanation and is skipped.
     */
    static Finding best(String op, DetectorContext ctx, float[] standard, List<Variant> variants) {
        TensorView ref = ctx.r(), cand = ctx.c();
        if (standard == null || standard.length != ref.elementCount() || cand.elementCount() != ref.elementCount()) return null;
        double near = ctx.near();
        if (Recompute.rel(standard, ref, 0) > near) return null;
        double distance = ctx.cell().relL2();
        var scored = new java.util.ArrayList<Scored>();
        var outputs = new java.util.ArrayList<float[]>();
        var same = new java.util.HashMap<Variant, List<String>>();
        outer:
        for (var v : variants) {
            float[] out = v.output().get();
            if (out == null || out.length != standard.length || java.util.Arrays.equals(out, standard)) continue;
            // two variants that compute the very same tensor here are one hypothesis on this input: the first enumerated names it
            for (int i = 0; i < outputs.size(); i++)
                if (java.util.Arrays.equals(outputs.get(i), out)) {
                    same.computeIfAbsent(scored.get(i).variant(), k -> new java.util.ArrayList<>()).add(v.name());
                    continue outer;
                }
            double rel = Recompute.rel(out, cand, 0);
            if (Double.isNaN(rel)) continue;
            scored.add(new Scored(v, rel));
            outputs.add(out);
        }
        scored.sort(java.util.Comparator.comparingDouble(Scored::rel));
        java.util.function.Function<Variant, String> alike = v -> same.containsKey(v)
                ? " (on this input the same tensor as: " + String.join("; ", same.get(v)) + ")" : "";
        if (scored.isEmpty()) return null;
        var first = scored.getFirst();
        if (!(first.rel() <= near && first.rel() * 10 <= distance)) return null;
        Scored second = scored.size() > 1 ? scored.get(1) : null;
        double margin = second == null || first.rel() == 0 ? Double.POSITIVE_INFINITY : second.rel() / first.rel();
        String runnerUp = second == null ? "no other variant" : "runner-up " + second.variant().name() + " at " + Fmt.sci(second.rel())
                + ", margin " + (Double.isInfinite(margin) ? "∞" : Fmt.sci(margin) + "×");
        if (margin < MIN_MARGIN)
            return Finding.of("two explanations fit " + ctx.point() + ": " + first.variant().name() + " (rel L2 " + Fmt.sci(first.rel())
                    + ") and " + second.variant().name() + " (rel L2 " + Fmt.sci(second.rel()) + "), against " + Fmt.sci(distance)
                    + " from the reference; neither is named (margin " + Fmt.num(margin, 3) + "× < " + (int) MIN_MARGIN + "×)");
        String named = first.variant().opOr(op);
        var scoredVariant = new Finding.Variant(named, first.variant().name(), first.rel(), second == null ? null : second.variant().name(),
                second == null ? Double.NaN : second.rel());
        return Finding.variant(scoredVariant, "recomputing " + named + " from the reference's inputs with " + first.variant().name()
                + " reproduces the candidate's " + ctx.point() + " (rel L2 " + Fmt.sci(first.rel()) + ", against " + Fmt.sci(distance)
                + " from the reference; " + runnerUp + ")" + alike.apply(first.variant()));
    }

    /** Round to the nearest bfloat16 (ties to even), as a scale stored in the weight dtype would be. */
    static float bf16(float x) {
        int b = Float.floatToRawIntBits(x);
        b += 0x7FFF + ((b >>> 16) & 1);
        return Float.intBitsToFloat(b & 0xFFFF0000);
    }
}
