package dev.decodiff.engine.qwen35;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Decode's own kernels give the plain loops' bits: the delta rule's step (in columns with AVX-512, in rows otherwise)
 * against the one-head recurrent form; attention over the block copy of the keys ({@link KeyBlocks}), gated, against
 * the scalar loop (per key one sum over the head dim in order, per output element one sum over the
 * keys in order, products and sums rounded apart, then times the gate). Groups of fewer, exactly and more than four
 * query heads, head dims with and without a vector tail, contexts inside one block and across many.
 */
class Qwen35DecodeKernelBitsTest {
    @ParameterizedTest
    @CsvSource({"8,2,256,0", "8,2,256,70", "8,2,256,300", "4,2,64,37", "6,3,20,19", "4,1,48,16", "16,2,40,33", "6,1,24,5", "2,2,8,15"})
    void blockAttentionHasTheScalarLoopsBits(int nh, int nkv, int d, int past) {
        var rnd = new Random(nh * 5L + d + past * 31L);
        int stride = nkv * d, n = past + 1, group = nh / nkv;
        float[] q = gauss(rnd, nh * d), gate = gauss(rnd, nh * d), K = gauss(rnd, (n + 5) * stride), V = gauss(rnd, (n + 5) * stride);
        float[] want = new float[nh * d];
        float scale = (float) Math.pow(d, -0.5);
        float[] scores = new float[n];
        for (int h = 0; h < nh; h++) {
            int qo = h * d, kvh = h / group;
            float max = Float.NEGATIVE_INFINITY;
            for (int j = 0; j < n; j++) {
                float s = 0f;
                for (int e = 0; e < d; e++) s += q[qo + e] * K[j * stride + kvh * d + e];
                scores[j] = s * scale;
                max = Math.max(max, scores[j]);
            }
            float sum = 0f;
            for (int j = 0; j < n; j++) {
                scores[j] = (float) Math.exp(scores[j] - max);
                sum += scores[j];
            }
            for (int j = 0; j < n; j++) {
                float pj = scores[j] / sum;
                for (int e = 0; e < d; e++) want[qo + e] += pj * V[j * stride + kvh * d + e];
            }
        }
        for (int j = 0; j < want.length; j++) want[j] = want[j] * gate[j];
        var blocks = new KeyBlocks(nkv, d);
        // caught up in two pieces, as a prefill and then a decode step leave it
        blocks.catchUp(K, n / 2);
        blocks.catchUp(K, n);
        float[] att = new float[nh * d];
        float[][] sc = new float[group][(n + KeyBlocks.WIDTH - 1) / KeyBlocks.WIDTH * KeyBlocks.WIDTH];
        for (int kvh = 0; kvh < nkv; kvh++) Qwen35Attention.decodeGroup(q, gate, blocks, V, kvh, n, nh, nkv, d, sc, att, true);
        assertThat(bits(att)).isEqualTo(bits(want));
    }

    /** The delta rule's step on all heads against the one-head recurrent form: widths with whole four-vector column chunks, single vectors and a scalar tail. */
    @ParameterizedTest
    @CsvSource({"2,16,80", "1,24,100", "3,128,128", "2,8,200"})
    void recurrentStepHasTheOneHeadFormsBits(int hv, int dk, int dv) {
        var rnd = new Random(hv * 13L + dk * 3L + dv);
        float[] q = gauss(rnd, hv * dk), k = gauss(rnd, hv * dk), v = gauss(rnd, hv * dv), S = gauss(rnd, hv * dk * dv);
        float[] beta = new float[hv], g = new float[hv];
        for (int h = 0; h < hv; h++) {
            beta[h] = rnd.nextFloat();
            g[h] = -rnd.nextFloat();
        }
        float[] want = S.clone(), wantOut = new float[hv * dv];
        for (int h = 0; h < hv; h++) {
            float[] sh = java.util.Arrays.copyOfRange(want, h * dk * dv, (h + 1) * dk * dv), oh = new float[dv];
            GatedDeltaRule.recurrent(java.util.Arrays.copyOfRange(q, h * dk, (h + 1) * dk), java.util.Arrays.copyOfRange(k, h * dk, (h + 1) * dk),
                    java.util.Arrays.copyOfRange(v, h * dv, (h + 1) * dv), new float[]{beta[h]}, new float[]{g[h]}, 1, dk, dv, sh, oh, false);
            System.arraycopy(sh, 0, want, h * dk * dv, dk * dv);
            System.arraycopy(oh, 0, wantOut, h * dv, dv);
        }
        float[] out = new float[hv * dv];
        GatedDeltaRule.recurrentStep(q, k, v, beta, g, hv, dk, dv, S, out);
        assertThat(bits(S)).isEqualTo(bits(want));
        assertThat(bits(out)).isEqualTo(bits(wantOut));
    }

    static float[] gauss(Random rnd, int n) {
        float[] a = new float[n];
        for (int i = 0; i < n; i++) a[i] = (float) rnd.nextGaussian();
        return a;
    }

    static int[] bits(float[] a) {
        int[] b = new int[a.length];
        for (int i = 0; i < a.length; i++) b[i] = Float.floatToRawIntBits(a[i]);
        return b;
    }
}
