package dev.decodiff.engine;

/**
 * The keys and values one non-shared layer keeps across steps: normed, rotated keys and normed values,
 * in fp32, one [nkv·d] row per position. New rows are committed only after the whole step has run, so every
 * layer of a step (and the KV-shared layers that read it) sees the same history.
 */
public sealed interface LayerCache permits FullLayerCache, SlidingLayerCache {
    /** Floats per position (nkv·d). */
    int stride();

    /** Positions committed so far (cumulative, also for a ring). */
    int length();

    /** Whether position p is still held. */
    boolean holds(int p);

    float[] keys();

    float[] values();

    /** Offset of position p's row in {@link #keys()} / {@link #values()}. */
    int offset(int p);

    /** Commits rows for positions [start, start+count) from k and v (row-major [count, stride]). */
    void commit(int start, int count, float[] k, float[] v);
}
