package dev.decodiff.engine.arch;

import dev.decodiff.engine.Probe;

/**
 * One conversation over a {@link LoadedModel}: its caches (KV, convolution, recurrent) and its position.
 * {@link #forward} feeds any number of tokens in one step and returns the last position's logits.
 */
public interface ModelSession {
    float[] forward(int[] tokens);

    /** Tokens consumed so far. */
    int position();

    void setProbe(Probe probe);

    /** A deep copy of every cache and the position, for {@link #restore}. */
    State snapshot();

    /** Continues from a snapshot taken on a session of the same model. */
    void restore(State state);

    /** An opaque copy of a session's state; only the session type that made it can restore it. */
    interface State {
        /** Tokens the state has consumed. */
        int position();
    }
}
