package dev.decodiff.engine;

/** A sliding-window layer's cache: a ring of W slots, position p in slot p mod W. */
public final class SlidingLayerCache implements LayerCache {
    private final int stride;
    private final int window;
    private final float[] keys;
    private final float[] values;
    private final boolean wrapFault;
    private int length;

    public SlidingLayerCache(int stride, int window) {
        this(stride, window, false);
    }

    /** @param wrapFault fault ring-wrap: once p ≥ W, position p is written one slot too far */
    SlidingLayerCache(int stride, int window, boolean wrapFault) {
        this.wrapFault = wrapFault;
        this.stride = stride;
        this.window = window;
        this.keys = new float[window * stride];
        this.values = new float[window * stride];
    }

    public int window() { return window; }
    @Override public int stride() { return stride; }
    @Override public int length() { return length; }
    @Override public boolean holds(int p) { return p >= 0 && p < length && p >= length - window; }
    @Override public float[] keys() { return keys; }
    @Override public float[] values() { return values; }
    @Override public int offset(int p) { return (p % window) * stride; }

    @Override
    public void commit(int start, int count, float[] k, float[] v) {
        if (start != length) throw new IllegalStateException("sliding cache holds " + length + " positions, cannot commit at " + start);
        // Only the last W positions can ever be read again.
        int first = Math.max(0, count - window);
        for (int t = first; t < count; t++) {
            int p = start + t;
            int dst = wrapFault && p >= window ? ((p + 1) % window) * stride : offset(p);
            System.arraycopy(k, t * stride, keys, dst, stride);
            System.arraycopy(v, t * stride, values, dst, stride);
        }
        length = start + count;
    }
}
