package dev.decodiff.harness.compare.detect;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.arch.LoadedModel;
import dev.decodiff.harness.compare.CellStats;
import dev.decodiff.harness.dump.StepTensors;
import dev.decodiff.metal.TensorView;

/**
 * What a detector sees: the failing cell, the reference's and the candidate's tensors of its step, the "near"
 * threshold below which two tensors count as equal, and — in bisect only — the model and the reference's earlier steps.
 *
 * @param model   the candidate's model (any architecture; a family's detectors unwrap their own), or null in compare
 *                (which has only the two dumps)
 * @param history the reference's tensors of every step, or null in compare
 */
public record DetectorContext(CellStats cell, StepTensors ref, StepTensors cand, double near, LoadedModel model,
                              ReferenceHistory history) {

    /** Below this rel L2 two tensors count as "equal" for a diagnosis: well above fp32 noise, well below any bug. */
    public static double nearEqual(double tolerance) { return Math.max(10 * tolerance, 1e-3); }

    /** A context without the model (compare). */
    public static DetectorContext of(CellStats cell, StepTensors ref, StepTensors cand) {
        return new DetectorContext(cell, ref, cand, nearEqual(cell.tolerance()), null, null);
    }

    public String point() { return cell.point(); }

    public String kind() { return CapturePoints.kindOf(cell.point()); }

    public int layer() { return CapturePoints.layerOf(cell.point()); }

    public TensorView r() { return ref.tensor(cell.point()); }

    public TensorView c() { return cand.tensor(cell.point()); }
}
