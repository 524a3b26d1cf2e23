package dev.decodiff.harness.bisect;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.harness.compare.CellKernel;
import dev.decodiff.harness.compare.CellStats;
import dev.decodiff.metal.TensorView;

import java.util.Arrays;

/** Cell statistics for bisect's own runs, with compare's rules (a read window of another length is a failing cell). */
public final class Cells {
    private Cells() {}

    public static CellStats of(int step, String point, TensorView ref, TensorView cand, double tol) {
        if (!Arrays.equals(ref.shape(), cand.shape())) {
            String kind = CapturePoints.kindOf(point);
            boolean read = CapturePoints.isCacheRead(kind);
            if (read && ref.rank() == cand.rank() && ref.rank() >= 1) return CellStats.shapeMismatch(step, point, ref.shape(), cand.shape(), tol);
            return new CellStats(step, point, ref.shape(), Double.POSITIVE_INFINITY, Double.NaN, Double.NaN, Double.NaN, Double.NaN,
                    Double.NaN, -1, 0, tol, "the engine's shape " + Arrays.toString(cand.shape()) + " differs from the reference's " + Arrays.toString(ref.shape()));
        }
        return CellStats.of(step, point, ref.shape(), CellKernel.sums(ref, cand), tol);
    }

    /** rel L2 over the last row (axis 0) only; over everything for rank 0 or 1. */
    public static double lastRow(TensorView ref, TensorView cand) {
        if (!Arrays.equals(ref.shape(), cand.shape())) return Double.POSITIVE_INFINITY;
        if (ref.rank() < 2) return CellKernel.relL2Rows(ref, 0, cand, 0, 1, ref.elementCount());
        long rows = ref.dim(0), row = ref.elementCount() / Math.max(1, rows);
        return CellKernel.relL2Rows(ref, rows - 1, cand, rows - 1, 1, row);
    }

    public static double all(TensorView ref, TensorView cand) {
        if (!Arrays.equals(ref.shape(), cand.shape())) return Double.POSITIVE_INFINITY;
        return CellKernel.relL2Rows(ref, 0, cand, 0, 1, ref.elementCount());
    }

    public static boolean within(double rel, double tol) { return rel <= tol; }
}
