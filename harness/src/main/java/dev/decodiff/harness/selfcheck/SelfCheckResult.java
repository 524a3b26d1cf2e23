package dev.decodiff.harness.selfcheck;

/**
 * The outcome of one reference-free check: passed, or the first (position, point) where two ways of computing
 * the same thing disagree, in causal order.
 */
public record SelfCheckResult(String check, String description, boolean passed, Integer position, String point,
                              double relL2, double tolerance, String detail) {
    public static SelfCheckResult pass(String check, String description, String detail) {
        return new SelfCheckResult(check, description, true, null, null, 0, 0, detail);
    }
}
