package dev.decodiff.harness.arch;

import dev.decodiff.engine.arch.ModelSession;

/**
 * A conversation that has read a shared prefix, with the state at the prefix's end kept twice over: for the same
 * session's next turn, and in the engine's own prefix cache for a new request that starts with the same tokens.
 * The engine's cache keeps its own kind of state, which the seam's {@link ModelSession.State} does not expose, so the
 * engine that made the session stores it ({@link TunableEngine#storedPrefix}).
 */
public interface StoredPrefix {
    /** The session that read the prefix; a next turn goes on from where it is. */
    ModelSession session();

    /** Puts {@link #session} back at the end of the prefix. */
    void rewind();

    /**
     * A new session for {@code tokens}, resumed from the stored prefix where it starts them and fed the rest in one
     * step; the tokens it reused (0 where the prefix did not fit).
     */
    int resume(int[] tokens);
}
