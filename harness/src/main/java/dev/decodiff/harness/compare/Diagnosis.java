package dev.decodiff.harness.compare;

import dev.decodiff.harness.compare.detect.DetectorContext;
import dev.decodiff.harness.compare.detect.Detectors;
import dev.decodiff.harness.compare.detect.Finding;
import dev.decodiff.harness.compare.detect.Wording;
import dev.decodiff.harness.dump.StepTensors;

/**
 * A one-line explanation of a failing cell where a known pattern fits: the candidate equals another reference tensor
 * of the same step and layer (values == keys), a constant scale factor, positions shifted by one along the read axis
 * of k_read/v_read, permuted heads, or swapped axes — compare's detectors ({@link Detectors#COMPARE}), in order.
 * Returns null when nothing fits: decodiff does not guess.
 */
public final class Diagnosis {
    private Diagnosis() {}

    public static String explain(CellStats cell, StepTensors ref, StepTensors cand) {
        Finding f = find(cell, ref, cand);
        return f == null ? null : f.sentence();
    }

    public static Finding find(CellStats cell, StepTensors ref, StepTensors cand) {
        return Detectors.explain(Detectors.COMPARE, DetectorContext.of(cell, ref, cand));
    }

    static String namedFactor(double a) { return Wording.namedFactor(a); }
}
