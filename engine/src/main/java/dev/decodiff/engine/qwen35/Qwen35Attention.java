package dev.decodiff.engine.qwen35;

import dev.decodiff.metal.Parallel;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * Causal softmax attention of one token's query heads that share a KV head, in fp32, with the bits of the plain
 * loop (per key one sum over the head dim in order, {@code s += q·k}; per output element one sum over the keys in
 * order, {@code o += p·v}; each product and sum rounded apart, never fused). Vectors run where every lane is its own
 * sum: across 16 keys at once for the scores (from a block copy of the keys, {@link KeyBlocks}), across the head dim
 * for the weighted values. The group's query heads share every key and value loaded. At a 2,048-token context the
 * scalar loop was a latency-bound chain of 1 M multiply-adds per head per token, longer than streaming the layer's
 * weights.
 */
final class Qwen35Attention {
    private static final VectorSpecies<Float> F = FloatVector.SPECIES_PREFERRED;
    private static final int L = F.length();

    private Qwen35Attention() {}

    /**
     * att [T][nh][d] (zeros on entry) of T tokens at positions start… over keys and values [pos][nkv][d] of positions
     * 0…start+T−1, causal: each (token, KV head) as {@link #decodeGroup} computes a decode token, over a block copy of the
     * keys made once for the call (plain loads across keys where the cache's rows need a 16-lane gather per multiply: a
     * sixth of a 512-token prefill went to those gathers), the (token, KV head) pairs shared out over the threads.
     */
    static void prefill(float[] q, float[] keys, float[] values, int T, int start, int nh, int nkv, int d, float[] att) {
        var blocks = new KeyBlocks(nkv, d);
        blocks.catchUp(keys, start + T);
        int group = nh / nkv, span = group * d, padded = (start + T + KeyBlocks.WIDTH - 1) / KeyBlocks.WIDTH * KeyBlocks.WIDTH;
        Parallel.forRange(T * nkv, 1, (p0, p1) -> {
            float[][] sc = new float[group][padded];
            float[] qt = new float[nh * d], at = new float[nh * d];
            for (int i = p0; i < p1; i++) {
                int t = i / nkv, kvh = i % nkv, o = kvh * span;
                System.arraycopy(q, t * nh * d + o, qt, o, span);
                java.util.Arrays.fill(at, o, o + span, 0f);
                decodeGroup(qt, null, blocks, values, kvh, start + t + 1, nh, nkv, d, sc, at, false);
                System.arraycopy(at, o, att, t * nh * d + o, span);
            }
        });
    }

    /**
     * {@link #group} of a decode token (t = 0) over keys held in blocks ({@link KeyBlocks}, positions 0…n−1 copied in)
     * and values [pos][nkv][d], then, where {@code gated}, each output times its gate: the same bits. The scores read
     * sixteen keys' same element with one load where the row layout needs a gather; the weighted values keep eight
     * accumulators in registers over a block of value rows instead of a load and a store of the output per product.
     * scores[g] scratch of at least n rounded up to a whole block for each head of the group.
     */
    static void decodeGroup(float[] q, float[] gate, KeyBlocks keys, float[] V, int kvh, int n, int nh, int nkv, int d, float[][] scores, float[] att,
                            boolean gated) {
        int group = nh / nkv, h0 = kvh * group, stride = nkv * d;
        float scale = (float) Math.pow(d, -0.5);
        for (int g0 = 0; g0 < group; g0 += 4) blockScores(q, (h0 + g0) * d, Math.min(4, group - g0), keys, kvh, n, d, scale, scores, g0);
        softmax(scores, group, n);
        for (int g0 = 0; g0 < group; g0 += 4) blockValues(scores, g0, Math.min(4, group - g0), V, kvh * d, stride, n, d, att, (h0 + g0) * d);
        if (gated) for (int o = h0 * d, end = (h0 + group) * d; o < end; o++) att[o] = att[o] * gate[o];
    }

    /** Each of the group's first n scores in place: max-subtracted exp in fp32, summed in order, divided by the sum. */
    private static void softmax(float[][] scores, int group, int n) {
        for (int g = 0; g < group; g++) {
            float[] sc = scores[g];
            float max = Float.NEGATIVE_INFINITY;
            for (int j = 0; j < n; j++) max = Math.max(max, sc[j]);
            float sum = 0f;
            for (int j = 0; j < n; j++) {
                sc[j] = (float) Math.exp(sc[j] - max);
                sum += sc[j];
            }
            for (int j = 0; j < n; j++) sc[j] = sc[j] / sum;
        }
    }

    /** Lanes of the block kernels: at most one block wide, so a block is a whole number of vectors. */
    private static final VectorSpecies<Float> B = F.length() <= KeyBlocks.WIDTH ? F : FloatVector.SPECIES_512;
    private static final int BL = B.length();
    /** Value rows {@link #blockValues} runs per pass over the output: 256 rows of a 256-wide head are 256 KB, in L2. */
    private static final int VALUE_ROWS = 256;

    /**
     * scores[s0 + i][j] for the m ≤ 4 heads whose queries start at q[qo + i·d], keys 0…(n rounded up to a block)−1:
     * per lane one sum over the head dim in order, then times the scale. Two lane vectors at a time (eight chains: one
     * multiply-add's latency per dim is shared by eight sums). Spare chains repeat the last head and are not stored.
     */
    private static void blockScores(float[] q, int qo, int m, KeyBlocks keys, int kvh, int n, int d, float scale, float[][] scores, int s0) {
        int q0 = qo, q1 = qo + Math.min(1, m - 1) * d, q2 = qo + Math.min(2, m - 1) * d, q3 = qo + (m - 1) * d;
        float[] kd = keys.data();
        int perBlock = KeyBlocks.WIDTH / BL, vectors = (n + KeyBlocks.WIDTH - 1) / KeyBlocks.WIDTH * perBlock, W = KeyBlocks.WIDTH;
        for (int v = 0; v < vectors; v += 2) {
            int pa = v / perBlock * W + v % perBlock * BL, ka = keys.offset(pa, kvh) + pa % W;
            boolean two = v + 1 < vectors;
            int pb = two ? (v + 1) / perBlock * W + (v + 1) % perBlock * BL : pa, kb = keys.offset(pb, kvh) + pb % W;
            var a0 = FloatVector.zero(B);
            var a1 = a0; var a2 = a0; var a3 = a0; var b0 = a0; var b1 = a0; var b2 = a0; var b3 = a0;
            for (int e = 0; e < d; e++) {
                var x = FloatVector.fromArray(B, kd, ka + e * W);
                var y = FloatVector.fromArray(B, kd, kb + e * W);
                float e0 = q[q0 + e], e1 = q[q1 + e], e2 = q[q2 + e], e3 = q[q3 + e];
                a0 = a0.add(x.mul(e0)); b0 = b0.add(y.mul(e0));
                a1 = a1.add(x.mul(e1)); b1 = b1.add(y.mul(e1));
                a2 = a2.add(x.mul(e2)); b2 = b2.add(y.mul(e2));
                a3 = a3.add(x.mul(e3)); b3 = b3.add(y.mul(e3));
            }
            a0.mul(scale).intoArray(scores[s0], pa);
            if (m > 1) a1.mul(scale).intoArray(scores[s0 + 1], pa);
            if (m > 2) a2.mul(scale).intoArray(scores[s0 + 2], pa);
            if (m > 3) a3.mul(scale).intoArray(scores[s0 + 3], pa);
            if (two) {
                b0.mul(scale).intoArray(scores[s0], pb);
                if (m > 1) b1.mul(scale).intoArray(scores[s0 + 1], pb);
                if (m > 2) b2.mul(scale).intoArray(scores[s0 + 2], pb);
                if (m > 3) b3.mul(scale).intoArray(scores[s0 + 3], pb);
            }
        }
    }

    /**
     * att[o + i·d + e] += p[s0 + i][j]·V[j·stride + vo + e] for j = 0…n−1 in order, the m ≤ 4 heads of one KV head
     * (att starts at zero). Per pass over up to {@link #VALUE_ROWS} rows, two lane vectors of each head's output stay
     * in registers; spare chains repeat the last head (they store its own values again).
     */
    private static void blockValues(float[][] p, int s0, int m, float[] V, int vo, int stride, int n, int d, float[] att, int o) {
        float[] p0 = p[s0], p1 = p[s0 + Math.min(1, m - 1)], p2 = p[s0 + Math.min(2, m - 1)], p3 = p[s0 + m - 1];
        int o0 = o, o1 = o + Math.min(1, m - 1) * d, o2 = o + Math.min(2, m - 1) * d, o3 = o + (m - 1) * d;
        int pair = d - d % (2 * BL), bound = d - d % BL;
        for (int j0 = 0; j0 < n; j0 += VALUE_ROWS) {
            int j1 = Math.min(n, j0 + VALUE_ROWS);
            int e = 0;
            for (; e < pair; e += 2 * BL) {
                var a0 = FloatVector.fromArray(B, att, o0 + e); var c0 = FloatVector.fromArray(B, att, o0 + e + BL);
                var a1 = FloatVector.fromArray(B, att, o1 + e); var c1 = FloatVector.fromArray(B, att, o1 + e + BL);
                var a2 = FloatVector.fromArray(B, att, o2 + e); var c2 = FloatVector.fromArray(B, att, o2 + e + BL);
                var a3 = FloatVector.fromArray(B, att, o3 + e); var c3 = FloatVector.fromArray(B, att, o3 + e + BL);
                for (int j = j0; j < j1; j++) {
                    int row = j * stride + vo + e;
                    var x = FloatVector.fromArray(B, V, row);
                    var y = FloatVector.fromArray(B, V, row + BL);
                    float w0 = p0[j], w1 = p1[j], w2 = p2[j], w3 = p3[j];
                    a0 = a0.add(x.mul(w0)); c0 = c0.add(y.mul(w0));
                    a1 = a1.add(x.mul(w1)); c1 = c1.add(y.mul(w1));
                    a2 = a2.add(x.mul(w2)); c2 = c2.add(y.mul(w2));
                    a3 = a3.add(x.mul(w3)); c3 = c3.add(y.mul(w3));
                }
                a3.intoArray(att, o3 + e); c3.intoArray(att, o3 + e + BL);
                a2.intoArray(att, o2 + e); c2.intoArray(att, o2 + e + BL);
                a1.intoArray(att, o1 + e); c1.intoArray(att, o1 + e + BL);
                a0.intoArray(att, o0 + e); c0.intoArray(att, o0 + e + BL);
            }
            for (; e < bound; e += BL) {
                var a0 = FloatVector.fromArray(B, att, o0 + e);
                var a1 = FloatVector.fromArray(B, att, o1 + e);
                var a2 = FloatVector.fromArray(B, att, o2 + e);
                var a3 = FloatVector.fromArray(B, att, o3 + e);
                for (int j = j0; j < j1; j++) {
                    var x = FloatVector.fromArray(B, V, j * stride + vo + e);
                    a0 = a0.add(x.mul(p0[j]));
                    a1 = a1.add(x.mul(p1[j]));
                    a2 = a2.add(x.mul(p2[j]));
                    a3 = a3.add(x.mul(p3[j]));
                }
                a3.intoArray(att, o3 + e);
                a2.intoArray(att, o2 + e);
                a1.intoArray(att, o1 + e);
                a0.intoArray(att, o0 + e);
            }
            for (; e < d; e++)
                for (int j = j0; j < j1; j++) {
                    float x = V[j * stride + vo + e];
                    att[o0 + e] += p0[j] * x;
                    if (m > 1) att[o1 + e] += p1[j] * x;
                    if (m > 2) att[o2 + e] += p2[j] * x;
                    if (m > 3) att[o3 + e] += p3[j] * x;
                }
        }
    }
}
