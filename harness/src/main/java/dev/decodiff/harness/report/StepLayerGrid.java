package dev.decodiff.harness.report;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.harness.compare.CellStats;
import dev.decodiff.harness.compare.ComparisonResult;

import java.util.ArrayList;
import java.util.List;

/**
 * The worst cell per (step, column): column 0 holds the points before layer 0 (embed, ple), then one column per
 * layer, then the points after the last layer (final_norm, logits). "Worst" = largest share of its tolerance.
 */
public final class StepLayerGrid {
    public final int steps, layers;
    public final CellStats[][] worst;

    public StepLayerGrid(ComparisonResult r) {
        steps = r.stepsCompared();
        layers = r.layerCount();
        worst = new CellStats[steps][layers + 2];
        for (var c : r.cells()) {
            int col = column(c.point());
            var cur = worst[c.step()][col];
            if (cur == null || usage(c) > usage(cur)) worst[c.step()][col] = c;
        }
    }

    static double usage(CellStats c) {
        double u = c.usage();
        return Double.isNaN(u) ? Double.POSITIVE_INFINITY : u;
    }

    public int column(String point) {
        int l = CapturePoints.layerOf(point);
        if (l >= 0) return l + 1;
        long rank = CapturePoints.causalRank(point);
        return rank <= 1 ? 0 : layers + 1;
    }

    public int columns() { return layers + 2; }

    public String columnName(int col) {
        if (col == 0) return "embed";
        if (col == layers + 1) return "final";
        return "L" + (col - 1);
    }

    /** Columns that hold at least one cell (a dump without ple/embed has no column 0, say). */
    public List<Integer> usedColumns() {
        var out = new ArrayList<Integer>();
        for (int col = 0; col < columns(); col++) {
            boolean any = false;
            for (int s = 0; s < steps && !any; s++) any = worst[s][col] != null;
            if (any) out.add(col);
        }
        return out;
    }

    /** Worst cell per layer over all steps (the per-layer curve for one step is {@code worst[step]}). */
    public CellStats worstOfColumn(int col) {
        CellStats w = null;
        for (int s = 0; s < steps; s++) {
            var c = worst[s][col];
            if (c != null && (w == null || usage(c) > usage(w))) w = c;
        }
        return w;
    }
}
