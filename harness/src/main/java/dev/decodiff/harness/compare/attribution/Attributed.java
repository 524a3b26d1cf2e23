package dev.decodiff.harness.compare.attribution;

import dev.decodiff.harness.compare.CellStats;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What local attribution found over a whole comparison: each compared cell's local error, and the precision effects
 * named, each with the cells it explains — on the candidate's side, and on the reference's (its own ops recomputed
 * from its own inputs, at the cells over tolerance). {@code exact}: the user asked that precision effects fail too.
 */
public record Attributed(Map<String, LocalError> cells, List<Effect> effects, boolean exact, Map<String, LocalError> referenceCells,
                         List<Effect> referenceEffects, boolean measuresEveryCell) {

    /** One named precision effect: how many cells it explains, and the first and the largest of them. */
    public record Effect(String explanation, int cells, LocalError first, LocalError largest) {}

    public static Attributed of(OpAttribution a, OpAttribution reference, List<CellStats> compared, boolean exact) {
        var byCell = cells(a, compared);
        var refCells = reference == null ? Map.<String, LocalError>of() : cells(reference, compared);
        return new Attributed(byCell, effects(byCell.values()), exact, refCells, effects(refCells.values()), a.measuresEveryCell());
    }

    private static Map<String, LocalError> cells(OpAttribution a, List<CellStats> compared) {
        var byCell = new LinkedHashMap<String, LocalError>();
        for (var c : compared) {
            var e = a.error(c.step(), c.point());
            if (e != null) byCell.put(OpAttribution.key(c.step(), c.point()), e);
        }
        return byCell;
    }

    private static List<Effect> effects(java.util.Collection<LocalError> errors) {
        var effects = new LinkedHashMap<String, List<LocalError>>();
        for (var e : errors) {
            // one effect whether or not some of its cells also needed a near-tie rounding the other way
            if (e.status() == LocalError.Status.PRECISION)
                effects.computeIfAbsent(e.explanation()
                        .replaceFirst("; \\d+ MoE routing decisions? at a near-tie taken the other way .*$", "; MoE routing decisions at a near-tie taken the other way")
                        .replaceFirst(" \\(\\d+ roundings? at a near-tie taken the other way\\)", ""), k -> new ArrayList<>()).add(e);
        }
        var list = new ArrayList<Effect>();
        effects.forEach((name, es) -> {
            LocalError largest = es.get(0);
            for (var e : es) if (e.local() > largest.local()) largest = e;
            list.add(new Effect(name, es.size(), es.get(0), largest));
        });
        return List.copyOf(list);
    }

    public LocalError of(int step, String point) { return cells.get(OpAttribution.key(step, point)); }

    public LocalError ofReference(int step, String point) { return referenceCells.get(OpAttribution.key(step, point)); }

    /** Whether any cell needed a precision hypothesis, on either side. */
    public boolean hasEffects() { return !effects.isEmpty() || !referenceEffects.isEmpty(); }

    /** Cells judged precision only because their local error lies inside their class's envelope (below its detection floor). */
    public List<LocalError> insideEnvelope() {
        return cells.values().stream().filter(e -> e.status() == LocalError.Status.PRECISION && e.envelope()).toList();
    }
}
