package dev.decodiff.harness.plan;

/**
 * What a read-back point ({@code attn.k_read} / {@code attn.v_read}) holds: the keys or values the step's <b>last</b>
 * query attends over, in position order (oldest first, never a ring buffer's slot order).
 *
 * @param window      the sliding window W (C = min(W, p+1)), or 0 on a full layer (C = p+1), or -1 when unknown
 * @param sourceLayer the layer whose cache is read (a KV-shared layer reads an earlier layer's), or -1 when unknown
 * @param lastRows    the producer keeps only the last N rows of each read ({@code read_rows} "last:N"), or 0 for all
 */
public record ReadBack(int window, int sourceLayer, int lastRows) {
    /** C at a step whose last position is p: the positions read, after the declared cut. */
    public long rows(long p) {
        long c = window > 0 ? Math.min(window, p + 1) : p + 1;
        return lastRows > 0 ? Math.min(lastRows, c) : c;
    }

    /** The first position read at last position p. */
    public long firstPosition(long p) { return p + 1 - rows(p); }
}
