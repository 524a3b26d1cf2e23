package dev.decodiff.harness.compare.detect;

/**
 * One known pattern behind a failing cell. A detector says which point kinds it can explain and, given the cell and
 * both sides' tensors of its step, returns a one-sentence {@link Finding} when the pattern fits, or null: decodiff
 * does not guess. Detectors run in a fixed order ({@link Detectors}); the first that fits explains the cell.
 */
public interface Detector {
    /** Whether cells of this point kind ("attn.v_read", "logits", …) can be explained by this detector. */
    boolean appliesTo(String kind);

    /** The finding when the pattern fits, else null. */
    Finding explain(DetectorContext ctx);

    /**
     * A supplement adds its finding to whatever explained the cell (or stands alone when nothing did), instead of
     * competing for first place: e.g. naming a scale factor that another detector already found.
     */
    default boolean supplements() { return false; }
}
