package dev.decodiff.engine.qwen35;

import java.util.Arrays;

/**
 * One full-attention layer's keys laid out for decode's scores: positions in blocks of {@link #WIDTH}, each block
 * [kv head][head dim][WIDTH position lanes]. A decode token's score of a key is one sum over the head dim in order;
 * vectors run across keys (each lane its own sum), so each step of that sum wants the same element of sixteen keys
 * side by side. The session's own cache stays [pos][kv head·d] (what captures, snapshots and prefill read); this is
 * a copy of it, caught up row by row, that a vector reads with a plain load where the row layout needs a gather
 * (a 16-lane gather per multiply at 2,048 positions made attention a third of a bf16 decode step). Blocks only
 * append, so the copy grows by doubling like the cache and never moves an element within its array.
 */
final class KeyBlocks {
    /** Positions per block: one AVX-512 vector, two AVX2 ones. */
    static final int WIDTH = 16;
    private final int nkv, d;
    private float[] data = new float[0];
    /** Positions [0, count) are copied from the session's cache. */
    private int count;

    KeyBlocks(int nkv, int d) {
        this.nkv = nkv;
        this.d = d;
    }

    /** Floats of one block: every KV head's d rows of WIDTH lanes. */
    int blockFloats() { return nkv * d * WIDTH; }

    /** Where KV head {@code kvh}'s dim 0 of the block holding {@code pos} starts; lane pos % WIDTH of each row is the key's. */
    int offset(int pos, int kvh) { return (pos / WIDTH) * blockFloats() + kvh * d * WIDTH; }

    float[] data() { return data; }

    int count() { return count; }

    /** Forgets every copied position (the cache's rows changed under it: a restore, a probe's replacement). */
    void clear() { count = 0; }

    /** Copies positions [count, total) of {@code rows} ([pos][nkv·d]) in, growing by doubling. */
    void catchUp(float[] rows, int total) {
        if (total <= count) return;
        int need = (total + WIDTH - 1) / WIDTH * blockFloats();
        if (data.length < need) data = Arrays.copyOf(data, Math.max(need, (int) Math.min(2L * data.length, Integer.MAX_VALUE - 16)));
        int stride = nkv * d;
        for (int p = count; p < total; p++) {
            int lane = p % WIDTH;
            for (int h = 0; h < nkv; h++) {
                int o = offset(p, h) + lane, src = p * stride + h * d;
                for (int e = 0; e < d; e++) data[o + e * WIDTH] = rows[src + e];
            }
        }
        count = total;
    }
}
