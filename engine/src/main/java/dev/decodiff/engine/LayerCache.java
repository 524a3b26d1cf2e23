package dev.decodiff.engine;

import dev.decodiff.metal.PackedRows;

/**
 * The keys and values one non-shared layer keeps across steps: normed, rotated keys and normed values, one
 * [nkv·d] row per position, stored as {@link KvType}s chosen separately for K and V. New rows are committed only
 * after the whole step has run, so every layer of a step (and the KV-shared layers reading it) sees one history.
 */
public abstract sealed class LayerCache permits FullLayerCache, SlidingLayerCache {
    protected final int stride;
    protected KvRows keys;
    protected KvRows values;
    protected int length;

    LayerCache(int stride, KvRows keys, KvRows values) {
        this.stride = stride;
        this.keys = keys;
        this.values = values;
    }

    /** Floats per position (nkv·d). */
    public int stride() { return stride; }

    /** Positions committed so far (cumulative, also for a ring). */
    public int length() { return length; }

    /** Whether position p is still held. */
    public abstract boolean holds(int p);

    /** The row that holds position p. */
    protected abstract int slot(int p);

    /** The f32 key array for reads in place, or null when keys are encoded (read them with {@link #readKey}). */
    public float[] keysF32() { return keys.floats(); }

    public float[] valuesF32() { return values.floats(); }

    /** Encoded keys as the attention kernels read them in place (row {@link #offset}/stride), or null for f32 keys. */
    public PackedRows packedKeys() { return keys.packed(); }

    public PackedRows packedValues() { return values.packed(); }

    /** Offset of position p's row in the f32 arrays. */
    public int offset(int p) { return slot(p) * stride; }

    public void readKey(int p, float[] dst, int off) { keys.read(slot(p), dst, off); }

    public void readValue(int p, float[] dst, int off) { values.read(slot(p), dst, off); }

    /** Commits rows for positions [start, start+count) from k and v (row-major [count, stride]). */
    public abstract void commit(int start, int count, float[] k, float[] v);

    /**
     * Cuts the cache back to its first {@code newLength} positions.
     *
     * @throws CacheTruncationException when positions the next token would attend to are already gone
     */
    public abstract void truncate(int newLength);

    /** A deep copy (for snapshots). */
    public abstract LayerCache copy();

    /** Bytes the stored rows take per position, K and V together, in their stored types. */
    public long bytesPerPosition() { return keys.bytesPerRow() + values.bytesPerRow(); }
}
