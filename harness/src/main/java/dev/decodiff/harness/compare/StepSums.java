package dev.decodiff.harness.compare;

import dev.decodiff.metal.Parallel;
import dev.decodiff.metal.TensorView;

import java.util.Arrays;

/**
 * The kernel pass over all cells of one step, spread over the cores by blocks of elements, not by cells. A step's
 * cells range from a few KB (a decode step's q) to tens of MB (the prefill's attention output), so a split by cell
 * leaves one core finishing the largest cells while the other waits; a split by block keeps both streaming to the
 * end. Most of the time is memory traffic and the first touch of mapped pages, which the second core shares.
 *
 * <p>Every block's partials come from {@link CellKernel#blockPartials} whoever computes them, and each cell's are
 * added in block order afterwards ({@link CellKernel#combine}), so the sums are bit-identical to
 * {@link CellKernel#sums} for any thread count or split.
 */
final class StepSums {
    /** Least blocks per piece of parallel work: 64K elements, 256 KB a side, far above the cost of a claim. */
    private static final int GRAIN = 16;

    private StepSums() {}

    /**
     * The sums of each pair (r[i], c[i]) whose shapes and dtypes agree; null where they do not, which the caller
     * reports (or rejects) on its own.
     */
    static CellKernel.Sums[] of(TensorView[] r, TensorView[] c) {
        int n = r.length;
        var out = new CellKernel.Sums[n];
        var blocked = new int[n];        // cells for the block split: float32 in loadable segments
        var byCell = new int[n];         // the rest (other dtypes, heap floats to copy): one cell per task
        int nb = 0, nc = 0;
        for (int i = 0; i < n; i++) {
            if (!Arrays.equals(r[i].shape(), c[i].shape()) || r[i].dtype() != c[i].dtype()) continue;
            if (CellKernel.vectorable(r[i], c[i])) blocked[nb++] = i;
            else byCell[nc++] = i;
        }

        // Block b of the step is block b − first[k] of cell blocked[k], for first[k] ≤ b < first[k + 1].
        var first = new int[nb + 1];
        for (int k = 0; k < nb; k++)
            first[k + 1] = Math.toIntExact(first[k] + CellKernel.blockCount(r[blocked[k]].elementCount()));
        int blocks = first[nb];
        var partials = new float[Math.multiplyExact(blocks, CellKernel.PARTIALS)];
        int cells = nb;
        Parallel.forRange(blocks, GRAIN, (from, to) -> {
            int k = Arrays.binarySearch(first, 0, cells + 1, from);
            if (k < 0) k = -k - 2; // not a cell's first block: the cell before the insertion point holds it
            for (int b = from; b < to; ) {
                while (first[k + 1] <= b) k++; // past empty cells (and the cell just finished)
                int end = Math.min(to, first[k + 1]);
                var rt = r[blocked[k]];
                CellKernel.blockPartials(rt.data(), c[blocked[k]].data(), rt.elementCount(), b - first[k], end - first[k],
                        partials, b * CellKernel.PARTIALS);
                b = end;
            }
        });
        for (int k = 0; k < nb; k++) {
            int i = blocked[k];
            var s = CellKernel.combine(r[i].data(), c[i].data(), r[i].elementCount(), partials, first[k] * CellKernel.PARTIALS);
            out[i] = CellKernel.withNonFinite(s, r[i], c[i]);
        }

        int others = nc;
        Parallel.forRange(others, 1, (from, to) -> {
            for (int k = from; k < to; k++) out[byCell[k]] = CellKernel.sums(r[byCell[k]], c[byCell[k]]);
        });
        return out;
    }
}
