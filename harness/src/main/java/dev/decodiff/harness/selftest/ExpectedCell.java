package dev.decodiff.harness.selftest;


/**
 * Where a correct harness must localize a catalog fault on one checkpoint and one case, fixed from the fault's
 * definition, the checkpoint's config.json (and its layer_scalar values) and the case's manifest — never from running
 * the engine. docs/faults.md lists the rules; each family's plug-in resolves its own catalog's.
 */
public sealed interface ExpectedCell {
    /** compare's first divergence and bisect's culprit must both be this cell. */
    record Cell(int step, Integer layer, String point, String why) implements ExpectedCell {
        public String describe() { return "step " + step + ", " + point; }
    }

    /** Right numbers: compare must match, and the reference-free check {@code check} must fail. */
    record NoNumericDivergence(String check, String why) implements ExpectedCell {}

    /**
     * The fault needs a cache policy (a restore, a cut) that a reference case, decoded straight through, never runs:
     * the reference-free scenario {@code check} on the case's tokens must fail first at (position, point).
     */
    record SelfCheckCell(String check, int position, String point, String why) implements ExpectedCell {
        public String describe() { return check + " at position " + position + ", " + point; }
    }

    /**
     * The engine throws at {@code step} before any cell is wrong: compare must report that step's exception and no
     * divergent cell, bisect the same.
     */
    record EngineThrows(int step, String why) implements ExpectedCell {
        public String describe() { return "the engine throws at step " + step; }
    }

    /** The fault cannot show in this case; {@code why} says what is missing. */
    record NotApplicable(String why) implements ExpectedCell {}
}
