package dev.decodiff.harness.dump;

import dev.decodiff.harness.compare.ToleranceProfile;

import java.util.List;
import java.util.function.Predicate;
import java.util.regex.Pattern;

/**
 * The points a user chose with {@code --points} (globs, '*' matching dots too). A dump records the globs as given
 * (manifest {@code selected_points}), so a comparison can tell a point the user left out from one that went missing.
 */
public record PointSelection(List<String> globs, List<Pattern> patterns) implements Predicate<String> {
    public static PointSelection of(List<String> globs) {
        var kept = globs.stream().map(String::strip).filter(g -> !g.isEmpty()).toList();
        return new PointSelection(kept, kept.stream().map(ToleranceProfile::glob).toList());
    }

    @Override
    public boolean test(String point) { return patterns.stream().anyMatch(p -> p.matcher(point).matches()); }

    @Override
    public String toString() { return String.join(",", globs); }
}
