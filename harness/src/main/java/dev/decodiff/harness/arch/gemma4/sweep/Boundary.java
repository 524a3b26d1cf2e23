package dev.decodiff.harness.arch.gemma4.sweep;

/**
 * A length at which a cache's bookkeeping changes, with the rule it comes from: "W−1", "W", "W+1", "2·W" (a ring
 * wrap), "2·chunk+1", "capacity". Found from the checkpoint's config and the engine's options by {@link Boundaries}.
 */
public record Boundary(int length, String label, String why) implements Comparable<Boundary> {
    @Override
    public int compareTo(Boundary o) { return Integer.compare(length, o.length); }

    @Override
    public String toString() { return length + " (" + label + ")"; }
}
