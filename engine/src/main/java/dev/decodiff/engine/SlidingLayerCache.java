package dev.decodiff.engine;

/**
 * A sliding-window layer's cache: a ring of W slots, position p in slot p mod W. The ring overwrites old positions,
 * so it can be cut back by at most one position (the next query at n reads n−W+1 … n−1, which the ring still holds
 * only while n ≥ length − 1); anything further needs a snapshot taken at that point.
 */
public final class SlidingLayerCache extends LayerCache {
    private final int window;
    private final boolean wrapFault;
    private final boolean truncateFault;

    public SlidingLayerCache(int stride, int window) {
        this(stride, window, KvType.F32, KvType.F32, false, false);
    }

    /**
     * @param wrapFault     fault ring-wrap: once p ≥ W, position p is written one slot too far
     * @param truncateFault fault sliding-truncate: cutting back past the valid point is allowed silently
     */
    SlidingLayerCache(int stride, int window, KvType kType, KvType vType, boolean wrapFault, boolean truncateFault) {
        super(stride, KvRows.create(kType, stride, window), KvRows.create(vType, stride, window));
        this.window = window;
        this.wrapFault = wrapFault;
        this.truncateFault = truncateFault;
    }

    private SlidingLayerCache(SlidingLayerCache o) {
        super(o.stride, o.keys.copy(), o.values.copy());
        this.window = o.window;
        this.wrapFault = o.wrapFault;
        this.truncateFault = o.truncateFault;
        this.length = o.length;
    }

    public int window() { return window; }

    @Override public boolean holds(int p) { return p >= 0 && p < length && p >= length - window; }

    @Override protected int slot(int p) { return p % window; }

    @Override
    public void commit(int start, int count, float[] k, float[] v) {
        if (start != length) throw new IllegalStateException("sliding cache holds " + length + " positions, cannot commit at " + start);
        // Only the last W positions can ever be read again.
        for (int t = Math.max(0, count - window); t < count; t++) {
            int p = start + t;
            int row = wrapFault && p >= window ? (p + 1) % window : slot(p);
            keys.write(row, k, t * stride);
            values.write(row, v, t * stride);
        }
        length = start + count;
    }

    /** Whether the ring still holds every position a token at newLength would attend to. */
    public boolean canTruncateTo(int newLength) {
        return newLength == 0 || (newLength <= length && newLength >= length - 1);
    }

    @Override
    public void truncate(int newLength) {
        if (newLength < 0 || newLength > length) throw new CacheTruncationException("cannot cut a cache of " + length + " positions to " + newLength);
        if (!canTruncateTo(newLength) && !truncateFault)
            throw new CacheTruncationException("a sliding-window cache holding positions up to " + (length - 1) + " cannot be cut back to "
                    + newLength + ": its ring (W=" + window + ") has overwritten positions " + Math.max(0, newLength - window + 1) + "…"
                    + (length - window - 1) + " that the next token attends to; restore a snapshot taken at " + newLength + " instead");
        length = newLength;
    }

    @Override public LayerCache copy() { return new SlidingLayerCache(this); }
}
