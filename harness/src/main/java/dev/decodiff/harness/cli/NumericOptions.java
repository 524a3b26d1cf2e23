package dev.decodiff.harness.cli;

import dev.decodiff.harness.BadInputException;

import java.util.Locale;

/** Range checks for numeric options: NaN, ±Infinity and out-of-range values are usage errors, never silently used. */
final class NumericOptions {
    private NumericOptions() {}

    /** A finite value ≥ min. */
    static double finiteAtLeast(String option, double value, double min) {
        if (!Double.isFinite(value) || value < min)
            throw new BadInputException(option + " must be a finite number ≥ " + fmt(min) + ", got " + value);
        return value;
    }

    /** A finite value > min. */
    static double finiteAbove(String option, double value, double min) {
        if (!Double.isFinite(value) || value <= min)
            throw new BadInputException(option + " must be a finite number > " + fmt(min) + ", got " + value);
        return value;
    }

    /** A finite value in [min, max]. */
    static double finiteIn(String option, double value, double min, double max) {
        if (!Double.isFinite(value) || value < min || value > max)
            throw new BadInputException(option + " must be a finite number in [" + fmt(min) + ", " + fmt(max) + "], got " + value);
        return value;
    }

    private static String fmt(double v) { return v == Math.rint(v) ? Long.toString((long) v) : String.format(Locale.ROOT, "%s", v); }
}
