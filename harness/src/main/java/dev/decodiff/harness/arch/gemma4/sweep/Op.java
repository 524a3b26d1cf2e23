package dev.decodiff.harness.arch.gemma4.sweep;

import java.util.List;

/**
 * One operation of a scenario's schedule on a numbered sequence. Every sequence reads its tokens from its own stream
 * (see {@link Scenario#streams}); a feed takes the stream's next tokens at the sequence's current length, so any two
 * schedules that reach a position of a sequence hold the same tokens there and must compute the same rows for it.
 */
public sealed interface Op {
    /** The next {@code n} tokens of sequence {@code seq} in one step: a prefill chunk, a decode step (n = 1) or a speculative verify (n > 1). */
    record Feed(int seq, int n) implements Op {
        public Feed {
            if (n < 1) throw new IllegalArgumentException("a feed needs at least one token, got " + n);
        }
    }

    /** One step that feeds several sequences together (a multi-sequence batch). */
    record Batch(List<Feed> feeds) implements Op {
        public Batch {
            feeds = List.copyOf(feeds);
            if (feeds.size() < 2) throw new IllegalArgumentException("a batch holds at least two feeds");
        }
    }

    /** Keeps the sequence's state under {@code name}. */
    record Snapshot(int seq, String name) implements Op {}

    /** Replaces the sequence's state by the one kept under {@code name} (taken from any sequence with the same stream prefix). */
    record Restore(int seq, String name) implements Op {}

    /** Cuts the sequence back to its first {@code length} positions (llama_memory_seq_rm from length on). */
    record Truncate(int seq, int length) implements Op {}

    /** Sequence {@code to} becomes the first {@code length} positions of sequence {@code from} (llama_memory_seq_cp, then seq_rm). */
    record Copy(int from, int to, int length) implements Op {}

    /**
     * The sequence's next positions start {@code n} further on: its stream's next token goes to position length + n
     * (llama.cpp takes any first position for an empty sequence). Rows are compared at their place in the stream.
     */
    record Offset(int seq, int n) implements Op {}

    /** Moves every position of the sequence by {@code delta} (llama_memory_seq_add: a context shift, keys re-rotated). */
    record Shift(int seq, int delta) implements Op {}

    /** A short text for reports: "feed 0×12", "truncate 0→9", "copy 0[:9]→1", "batch(0×1, 1×1)". */
    static String describe(Op op) {
        return switch (op) {
            case Feed f -> "feed " + f.seq() + "×" + f.n();
            case Batch b -> "batch(" + String.join(", ", b.feeds().stream().map(f -> f.seq() + "×" + f.n()).toList()) + ")";
            case Snapshot s -> "snapshot " + s.seq() + " as " + s.name();
            case Restore r -> "restore " + r.seq() + " from " + r.name();
            case Truncate t -> "truncate " + t.seq() + "→" + t.length();
            case Copy c -> "copy " + c.from() + "[:" + c.length() + "]→" + c.to();
            case Offset o -> "offset " + o.seq() + "+" + o.n();
            case Shift s -> "shift " + s.seq() + (s.delta() < 0 ? "" : "+") + s.delta();
        };
    }
}
