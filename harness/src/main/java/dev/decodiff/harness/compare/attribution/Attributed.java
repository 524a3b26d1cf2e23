package dev.decodiff.harness.compare.attribution;

import dev.decodiff.harness.compare.CellStats;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What local attribution found over a whole comparison: each compared cell's local error, and the precision effects
 * named, each with the cells it explains. {@code exact}: the user asked that precision effects fail too.
 */
public record Attributed(Map<String, LocalError> cells, List<Effect> effects, boolean exact) {

    /** One named precision effect: how many cells it explains, and the first and the largest of them. */
    public record Effect(String explanation, int cells, LocalError first, LocalError largest) {}

    public static Attributed of(LocalAttribution a, List<CellStats> compared, boolean exact) {
        var byCell = new LinkedHashMap<String, LocalError>();
        var effects = new LinkedHashMap<String, List<LocalError>>();
        for (var c : compared) {
            var e = a.error(c.step(), c.point());
            if (e == null) continue;
            byCell.put(LocalAttribution.key(c.step(), c.point()), e);
            // one effect whether or not some of its cells also needed a near-tie rounding the other way
            if (e.status() == LocalError.Status.PRECISION)
                effects.computeIfAbsent(e.explanation().replaceFirst(" \\(\\d+ roundings? at a near-tie taken the other way\\)$", ""),
                        k -> new ArrayList<>()).add(e);
        }
        var list = new ArrayList<Effect>();
        effects.forEach((name, es) -> {
            LocalError largest = es.get(0);
            for (var e : es) if (e.local() > largest.local()) largest = e;
            list.add(new Effect(name, es.size(), es.get(0), largest));
        });
        return new Attributed(byCell, List.copyOf(list), exact);
    }

    public LocalError of(int step, String point) { return cells.get(LocalAttribution.key(step, point)); }

    /** Whether any cell needed a precision hypothesis. */
    public boolean hasEffects() { return !effects.isEmpty(); }
}
