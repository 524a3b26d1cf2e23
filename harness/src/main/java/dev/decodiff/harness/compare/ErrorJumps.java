package dev.decodiff.harness.compare;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.harness.report.Fmt;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * Without the checkpoint no op can be recomputed, but how far a cell's error jumps over the errors of the cells that
 * feed it still points at the op that adds most: each cell over tolerance against the worst cell of its step between
 * its layer's input residual (the previous layer's out, or embed) and itself. A ranking, not a verdict.
 */
public final class ErrorJumps {
    private ErrorJumps() {}

    public record Jump(CellStats cell, double factor, String over) {}

    /** The largest jumps, largest first, each point once. */
    public static List<Jump> largest(List<CellStats> cells, int n) {
        var out = new ArrayList<Jump>();
        int i = 0;
        while (i < cells.size()) {
            int step = cells.get(i).step(), j = i;
            while (j < cells.size() && cells.get(j).step() == step) j++;
            var stepCells = new ArrayList<>(cells.subList(i, j));
            stepCells.sort(Comparator.comparing(CellStats::point, Comparison.CAUSAL));
            for (int k = 0; k < stepCells.size(); k++) {
                var c = stepCells.get(k);
                if (c.passed() || !Double.isFinite(c.relL2())) continue;
                int layer = c.layer();
                String input = layer <= 0 ? CapturePoints.EMBED : CapturePoints.layer(layer - 1, CapturePoints.OUT);
                CellStats worst = null;
                for (int m = k - 1; m >= 0; m--) {
                    var u = stepCells.get(m);
                    if (worst == null || u.relL2() > worst.relL2()) worst = u;
                    if (u.point().equals(input)) break;
                }
                double base = worst == null ? 0 : worst.relL2();
                double factor = base > 0 ? c.relL2() / base : Double.POSITIVE_INFINITY;
                out.add(new Jump(c, factor, worst == null ? "nothing upstream" : worst.point() + " " + Fmt.rel(base)));
            }
            i = j;
        }
        out.sort(Comparator.comparingDouble(Jump::factor).reversed());
        var seen = new java.util.HashSet<String>();
        var distinct = new ArrayList<Jump>();
        for (var j : out) if (seen.add(j.cell().point()) && distinct.size() < n) distinct.add(j); // each point once, at its largest
        return distinct;
    }

    /** "layers.2.attn.v at step 0 (×4.1e3 over layers.2.attn.k 1.4e-4), …". */
    public static String describe(List<Jump> jumps) {
        var parts = new ArrayList<String>();
        for (var j : jumps)
            parts.add(j.cell().point() + " at step " + j.cell().step() + " (" + Fmt.rel(j.cell().relL2())
                    + (Double.isInfinite(j.factor()) ? ", the first error of its step" : ", ×" + Fmt.format("%.3g", j.factor()) + " over " + j.over()) + ")");
        return String.join("; ", parts);
    }
}
