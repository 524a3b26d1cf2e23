package dev.decodiff.harness.compare.detect;

/**
 * What a detector found: one sentence, and — when the finding is a recomputation that reproduced the candidate under
 * a named variant of an operation — which op and which variant.
 */
public record Finding(String sentence, Variant variant) {
    /** An operation of the layer ("attention", "mlp.act", "rope", …) and the variant of it that reproduced the candidate. */
    public record Variant(String op, String name) {}

    public static Finding of(String sentence) { return sentence == null ? null : new Finding(sentence, null); }

    public static Finding variant(String op, String name, String sentence) { return new Finding(sentence, new Variant(op, name)); }

    /** This finding with another one's sentence after it ("…; …"), keeping the first variant found. */
    Finding and(Finding more) {
        return new Finding(sentence + "; " + more.sentence, variant != null ? variant : more.variant);
    }
}
