package dev.decodiff.engine.qwen35;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * Causal softmax attention of one token's query heads that share a KV head, in fp32, with the bits of the plain
 * loop (per key one sum over the head dim in order, {@code s += q·k}; per output element one sum over the keys in
 * order, {@code o += p·v}; each product and sum rounded apart, never fused). Vectors run where every lane is its own
 * sum: across 16 keys at once for the scores (a gather down the cache's rows), across the head dim for the weighted
 * values. The group's query heads share every key and value loaded. At a 2,048-token context the scalar loop was a
 * latency-bound chain of 1 M multiply-adds per head per token, longer than streaming the layer's weights.
 */
final class Qwen35Attention {
    private static final VectorSpecies<Float> F = FloatVector.SPECIES_PREFERRED;
    private static final int L = F.length();

    private Qwen35Attention() {}

    /**
     * att[t, h] for the query heads h of KV head {@code kvh} over keys 0…n−1: q [T][nh][d], K and V [pos][nkv][d]
     * (stride = nkv·d), scores[g] scratch of at least n for each head of the group.
     */
    static void group(float[] q, float[] K, float[] V, int t, int kvh, int n, int nh, int nkv, int d, int stride, float[][] scores, float[] att) {
        int group = nh / nkv, h0 = kvh * group;
        float scale = (float) Math.pow(d, -0.5);
        int[] qo = new int[group];
        for (int g = 0; g < group; g++) qo[g] = (t * nh + h0 + g) * d;
        scoreKeys(q, qo, K, kvh * d, stride, n, d, scale, scores);
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
        weightedValues(scores, V, kvh * d, stride, n, d, att, qo);
    }

    /** scores[g][j] = (Σ_e q[qo[g]+e]·K[j·stride+ko+e]) · scale, the sum over e in order. */
    private static void scoreKeys(float[] q, int[] qo, float[] K, int ko, int stride, int n, int d, float scale, float[][] scores) {
        int group = qo.length, j = 0;
        int[] rows = new int[L];
        for (int l = 0; l < L; l++) rows[l] = l * stride;
        var acc = new FloatVector[group];
        for (; j + L <= n; j += L) {
            for (int g = 0; g < group; g++) acc[g] = FloatVector.zero(F);
            int base = j * stride + ko;
            for (int e = 0; e < d; e++) {
                var k = FloatVector.fromArray(F, K, base + e, rows, 0);
                for (int g = 0; g < group; g++) acc[g] = acc[g].add(k.mul(q[qo[g] + e]));
            }
            for (int g = 0; g < group; g++) acc[g].mul(scale).intoArray(scores[g], j);
        }
        for (; j < n; j++) {
            int kb = j * stride + ko;
            for (int g = 0; g < group; g++) {
                float s = 0f;
                for (int e = 0; e < d; e++) s += q[qo[g] + e] * K[kb + e];
                scores[g][j] = s * scale;
            }
        }
    }

    /**
     * att[qo[g]+e] += p[g][j]·V[j·stride+vo+e] for j in order (att starts at zero): the keys outermost, so each value
     * row is read once, front to back, for the whole group.
     */
    private static void weightedValues(float[][] p, float[] V, int vo, int stride, int n, int d, float[] att, int[] qo) {
        int group = qo.length, bound = d - d % L;
        for (int j = 0; j < n; j++) {
            int row = j * stride + vo;
            for (int e = 0; e < bound; e += L) {
                var v = FloatVector.fromArray(F, V, row + e);
                for (int g = 0; g < group; g++) {
                    int o = qo[g] + e;
                    FloatVector.fromArray(F, att, o).add(v.mul(p[g][j])).intoArray(att, o);
                }
            }
            for (int e = bound; e < d; e++)
                for (int g = 0; g < group; g++) att[qo[g] + e] += p[g][j] * V[row + e];
        }
    }
}
