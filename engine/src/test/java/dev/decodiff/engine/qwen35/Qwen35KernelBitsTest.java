package dev.decodiff.engine.qwen35;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The decode kernels that replaced plain loops give the plain loops' bits: the delta rule's step over all heads in
 * place against the one-head recurrent form, and the grouped, vectorized attention against the scalar loop (per key
 * one sum over the head dim in order, per output element one sum over the keys in order, products and sums rounded
 * apart). Shapes with and without a vector tail.
 */
class Qwen35KernelBitsTest {
    @ParameterizedTest
    @CsvSource({"4,32,32", "2,128,128", "3,8,12", "2,20,36"})
    void recurrentStepHasTheOneHeadFormsBits(int hv, int dk, int dv) {
        var rnd = new Random(hv * 131L + dk * 7L + dv);
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

    @ParameterizedTest
    @CsvSource({"1,8,2,256,1", "1,8,2,256,70", "3,4,2,64,37", "2,6,3,20,19", "1,4,1,48,16"})
    void groupedAttentionHasTheScalarLoopsBits(int T, int nh, int nkv, int d, int past) {
        var rnd = new Random(T * 17L + nh * 5L + d + past);
        int stride = nkv * d, total = past + T;
        float[] q = gauss(rnd, T * nh * d), K = gauss(rnd, (total + 5) * stride), V = gauss(rnd, (total + 5) * stride);
        float[] want = new float[T * nh * d];
        float scale = (float) Math.pow(d, -0.5);
        int group = nh / nkv;
        float[] scores = new float[total];
        for (int t = 0; t < T; t++) {
            int n = past + t + 1;
            for (int h = 0; h < nh; h++) {
                int qo = (t * nh + h) * d, kvh = h / group;
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
        }
        float[] att = new float[T * nh * d];
        float[][] sc = new float[group][total];
        for (int t = 0; t < T; t++)
            for (int kvh = 0; kvh < nkv; kvh++) Qwen35Attention.group(q, K, V, t, kvh, past + t + 1, nh, nkv, d, stride, sc, att);
        assertThat(bits(att)).isEqualTo(bits(want));
    }

    private static float[] gauss(Random rnd, int n) {
        float[] a = new float[n];
        for (int i = 0; i < n; i++) a[i] = (float) rnd.nextGaussian();
        return a;
    }

    private static int[] bits(float[] a) {
        int[] b = new int[a.length];
        for (int i = 0; i < a.length; i++) b[i] = Float.floatToRawIntBits(a[i]);
        return b;
    }
}
