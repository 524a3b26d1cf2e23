package dev.decodiff.harness.selfcheck;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.harness.compare.CellStats;
import dev.decodiff.harness.report.Fmt;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;

/**
 * What every selfcheck shares, whatever engine it checks: the fp32 tolerance two paths must agree to, the decode
 * schedule, and the first (position, point) where two recordings of the same tokens disagree.
 */
public final class Agreement {
    private Agreement() {}

    /** fp32 paths that differ only in summation order stay far below this; every catalog fault is far above. */
    public static final double TOLERANCE = 1e-4;

    /** The steps of a prompt prefilled in one pass and then decoded one token at a time: {promptLength, 1, 1, …}. */
    public static int[] decodeSplits(int tokens, int promptLength) {
        var splits = new int[1 + tokens - promptLength];
        splits[0] = promptLength;
        Arrays.fill(splits, 1, splits.length, 1);
        return splits;
    }

    public static SelfCheckResult firstDisagreement(String check, String description, RowRecorder reference, RowRecorder candidate) {
        return firstDisagreement(check, description, reference, candidate, TOLERANCE);
    }

    public static SelfCheckResult firstDisagreement(String check, String description, RowRecorder reference, RowRecorder candidate, double tolerance) {
        record Cell(int pos, String point, double rel) {}
        var failures = new ArrayList<Cell>();
        int cells = 0;
        double worst = 0;
        for (var e : reference.rows.entrySet()) {
            var cand = candidate.rows.get(e.getKey());
            if (cand == null) continue;
            for (var r : e.getValue().entrySet()) {
                float[] c = cand.get(r.getKey());
                if (c == null) continue;
                cells++;
                double rel = c.length == r.getValue().length ? CellStats.relL2(c, r.getValue()) : Double.POSITIVE_INFINITY;
                worst = Math.max(worst, Double.isNaN(rel) ? Double.POSITIVE_INFINITY : rel);
                if (!(rel <= tolerance)) failures.add(new Cell(r.getKey(), e.getKey(), rel));
            }
        }
        if (failures.isEmpty())
            return SelfCheckResult.pass(check, description, Fmt.format("%d cells agree, worst rel L2 %.2e", cells, worst));
        var first = failures.stream()
                .min(Comparator.comparingInt(Cell::pos).thenComparingLong(c -> CapturePoints.causalRank(c.point())))
                .orElseThrow();
        return new SelfCheckResult(check, description, false, first.pos(), first.point(), first.rel(), tolerance,
                Fmt.format("%d of %d cells disagree; first at position %d, %s (rel L2 %.3g)", failures.size(), cells, first.pos(), first.point(), first.rel()));
    }
}
