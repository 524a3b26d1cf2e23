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

        /**
         * The wrong prefix reuse of a hybrid model: this state's attention KV with every recurrent state (conv and
         * linear attention) zeroed, as a prompt cache that checkpoints only attention holds. Null for an architecture
         * without recurrent state.
         */
        default State withoutRecurrentState() { return null; }

        /**
         * This state's attention KV and position with the recurrent states of {@code other} (taken at another
         * position of the same conversation): a cache whose checkpoints of the two kinds went out of step. Null for an
         * architecture without recurrent state.
         */
        default State withRecurrentStateOf(State other) { return null; }
    }
}
