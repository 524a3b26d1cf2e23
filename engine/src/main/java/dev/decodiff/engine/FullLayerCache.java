package dev.decodiff.engine;

import java.util.Arrays;

/** A full-attention layer's cache: every position is kept. */
public final class FullLayerCache implements LayerCache {
    private final int stride;
    private float[] keys;
    private float[] values;
    private int length;

    public FullLayerCache(int stride, int initialPositions) {
        this.stride = stride;
        this.keys = new float[Math.max(1, initialPositions) * stride];
        this.values = new float[keys.length];
    }

    @Override public int stride() { return stride; }
    @Override public int length() { return length; }
    @Override public boolean holds(int p) { return p >= 0 && p < length; }
    @Override public float[] keys() { return keys; }
    @Override public float[] values() { return values; }
    @Override public int offset(int p) { return p * stride; }

    @Override
    public void commit(int start, int count, float[] k, float[] v) {
        if (start != length) throw new IllegalStateException("full cache holds " + length + " positions, cannot commit at " + start);
        int need = (start + count) * stride;
        if (need > keys.length) {
            int cap = Math.max(need, keys.length * 2);
            keys = Arrays.copyOf(keys, cap);
            values = Arrays.copyOf(values, cap);
        }
        System.arraycopy(k, 0, keys, start * stride, count * stride);
        System.arraycopy(v, 0, values, start * stride, count * stride);
        length = start + count;
    }
}
