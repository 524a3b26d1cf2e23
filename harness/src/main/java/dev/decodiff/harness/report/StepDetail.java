package dev.decodiff.harness.report;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.harness.compare.CellStats;
import dev.decodiff.harness.compare.ComparisonResult;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The layers × points view of the step a report focuses on — the first divergent step, or the step of the closest call
 * when everything matches — as the terminal, HTML and JSON reports show it: the point kinds in causal order as
 * columns, one row per layer, and the model-level cells before the first layer (embed, ple) and after the last
 * (final_norm, logits).
 *
 * @param firstPoint the first divergent cell's point (marked in every view), or null on a match
 */
public record StepDetail(int step, boolean divergent, String firstPoint, List<String> kinds, Map<Integer, Map<String, CellStats>> layers,
                         List<CellStats> before, List<CellStats> after) {

    /** The focus step of a comparison; empty (no kinds, no layers) when no cell of it was compared. */
    public static StepDetail of(ComparisonResult r) {
        var fd = r.firstDivergence();
        int step = fd != null ? fd.step() : (r.worstCell() != null ? r.worstCell().step() : 0);
        var kinds = new ArrayList<String>();
        var layers = new LinkedHashMap<Integer, Map<String, CellStats>>();
        var before = new ArrayList<CellStats>();
        var after = new ArrayList<CellStats>();
        for (var c : r.cellsOfStep(step)) {
            if (c.layer() < 0) {
                (CapturePoints.causalRank(c.point()) <= 1 ? before : after).add(c);
                continue;
            }
            if (!kinds.contains(c.kind())) kinds.add(c.kind());
            layers.computeIfAbsent(c.layer(), k -> new LinkedHashMap<>()).put(c.kind(), c);
        }
        kinds.sort(Comparator.comparingLong(k -> CapturePoints.causalRank(CapturePoints.layer(0, k))));
        return new StepDetail(step, fd != null, fd == null ? null : fd.point(), List.copyOf(kinds), layers, List.copyOf(before), List.copyOf(after));
    }

    public boolean isEmpty() { return layers.isEmpty() && before.isEmpty() && after.isEmpty(); }

    /** "First divergent step: step 1" or "Closest-call step: step 11". */
    public String title() { return (divergent ? "First divergent step" : "Closest-call step") + ": step " + step; }

    /** Whether this cell is the first divergence (the one the views mark). */
    public boolean isFirst(CellStats c) { return c != null && c.point().equals(firstPoint); }

    /** A cell's value as every view writes it: its rel L2, "NaN" with non-finite values, "shape" when the shapes differ. */
    public static String value(CellStats c) {
        return c.nonFinite() > 0 ? "NaN" : c.shapeNote() != null ? "shape" : Fmt.rel(c.relL2());
    }
}
