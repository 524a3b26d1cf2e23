package dev.decodiff.harness.compare.detect;

/**
 * What a detector found: one sentence, and — when the finding is a recomputation that reproduced the candidate under
 * a named variant of an operation — which op and which variant.
 */
public record Finding(String sentence, Variant variant) {
    /**
     * An operation of the layer ("attention", "mlp.act", "rope", …) and the variant of it that reproduced the candidate;
     * where a search scored it, its rel L2 to the candidate and the runner-up's (NaN and null otherwise).
     */
    public record Variant(String op, String name, double relL2, String runnerUp, double runnerUpRelL2) {
        public Variant(String op, String name) { this(op, name, Double.NaN, null, Double.NaN); }

        /** The runner-up's rel L2 over this variant's: how much better this explanation fits (∞ when it fits exactly). */
        public double margin() { return runnerUp == null || Double.isNaN(relL2) ? Double.NaN : relL2 == 0 ? Double.POSITIVE_INFINITY : runnerUpRelL2 / relL2; }
    }

    public static Finding of(String sentence) { return sentence == null ? null : new Finding(sentence, null); }

    public static Finding variant(String op, String name, String sentence) { return new Finding(sentence, new Variant(op, name)); }

    /** A scored variant: its rel L2 to the candidate, and the runner-up of its search with its rel L2. */
    public static Finding variant(Variant v, String sentence) { return new Finding(sentence, v); }

    /** This finding with another one's sentence after it ("…; …"), keeping the first variant found. */
    Finding and(Finding more) {
        return new Finding(sentence + "; " + more.sentence, variant != null ? variant : more.variant);
    }
}
