package dev.decodiff.engine;

/**
 * Sees the tensors at every capture point of docs/dump-format.md while the engine runs, and may replace them
 * (the substitution that bisect uses to prove a cause). With no probe attached the engine skips all of this.
 *
 * <p>Data handed to {@link #capture} is a private copy in row-major order; a returned replacement must have
 * the same length and is copied back into the engine's own buffer before the computation goes on.
 */
public interface Probe {
    /** Whether this probe wants the named point; points it does not want are neither copied nor offered. */
    default boolean wants(String point) { return true; }

    /** A step begins: it feeds positions [start, start+length). */
    default void beginStep(int step, int start, int length) {}

    /**
     * Observes the tensor at a capture point.
     *
     * @return null to leave it as computed, or a replacement of the same length
     */
    float[] capture(String point, int[] shape, float[] data);

    /** The step ended with these last-position logits and the engine's greedy choice. */
    default void endStep(int step, float[] logits, int greedyToken) {}
}
