package dev.decodiff.engine;

/** A full-attention layer's cache: every position is kept, so it can be cut back to any length. */
public final class FullLayerCache extends LayerCache {
    /** Fault cache-drops-first-position: the first position this cache admits to holding (0 when correct). */
    private final int firstHeld;

    public FullLayerCache(int stride, int initialPositions) {
        this(stride, initialPositions, KvType.F32, KvType.F32, false);
    }

    /** @param dropFirstFault fault cache-drops-first-position: position 0 counts as gone once committed */
    FullLayerCache(int stride, int initialPositions, KvType kType, KvType vType, boolean dropFirstFault) {
        super(stride, KvRows.create(kType, stride, Math.max(1, initialPositions)), KvRows.create(vType, stride, Math.max(1, initialPositions)));
        this.firstHeld = dropFirstFault ? 1 : 0;
    }

    private FullLayerCache(FullLayerCache other) {
        super(other.stride, other.keys.copy(), other.values.copy());
        this.length = other.length;
        this.firstHeld = other.firstHeld;
    }

    @Override public boolean holds(int p) { return p >= firstHeld && p < length; }

    @Override protected int slot(int p) { return p; }

    @Override
    public void commit(int start, int count, float[] k, float[] v) {
        if (start != length) throw new IllegalStateException("full cache holds " + length + " positions, cannot commit at " + start);
        int need = start + count;
        if (need > keys.capacity) {
            int cap = Math.max(need, keys.capacity * 2);
            keys.grow(cap);
            values.grow(cap);
        }
        for (int t = 0; t < count; t++) {
            keys.write(start + t, k, t * stride);
            values.write(start + t, v, t * stride);
        }
        length = need;
    }

    @Override
    public void truncate(int newLength) {
        if (newLength < 0 || newLength > length) throw new CacheTruncationException("cannot cut a cache of " + length + " positions to " + newLength);
        length = newLength;
    }

    @Override public LayerCache copy() { return new FullLayerCache(this); }
}
