package dev.decodiff.harness.arch.gemma4.bisect;

import dev.decodiff.harness.bisect.Cells;
import dev.decodiff.engine.CapturePoints;
import dev.decodiff.harness.compare.CellStats;
import dev.decodiff.harness.compare.Comparison;
import dev.decodiff.harness.compare.ToleranceProfile;
import dev.decodiff.harness.dump.CapturedTensor;
import dev.decodiff.harness.dump.DumpStep;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Consumer;

/**
 * The cells of bisect's local run (every layer on the reference's input), judged as the engine produces each tensor
 * so the heap holds one tensor, not the step. Kept afterwards: the tensor of the causally first failing cell (what
 * the detectors read of the candidate) and its layer's out (what the substitutions are judged against).
 */
final class LocalCells implements Consumer<CapturedTensor> {
    final TreeMap<String, CellStats> cells = new TreeMap<>(Comparison.CAUSAL);
    final Map<String, CapturedTensor> kept = new LinkedHashMap<>();
    private final int step;
    private final DumpStep refStep;
    private final ToleranceProfile profile;
    private String first;

    LocalCells(int step, DumpStep refStep, ToleranceProfile profile) {
        this.step = step;
        this.refStep = refStep;
        this.profile = profile;
    }

    @Override
    public void accept(CapturedTensor t) {
        String p = t.point();
        if (!refStep.has(p)) return;
        var cell = Cells.of(step, p, refStep.tensor(p), t.view(), profile.tolerance(p));
        cells.put(p, cell);
        if (cell.failed() && (first == null || Comparison.CAUSAL.compare(p, first) < 0)) {
            first = p;
            kept.clear();
            kept.put(p, t);
        } else if (first != null && CapturePoints.layerOf(first) >= 0
                && p.equals(CapturePoints.layer(CapturePoints.layerOf(first), CapturePoints.OUT))) {
            kept.put(p, t);
        }
    }
}
