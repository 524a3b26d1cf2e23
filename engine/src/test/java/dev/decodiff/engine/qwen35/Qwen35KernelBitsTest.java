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
        Qwen35Attention.prefill(q, K, V, T, past, nh, nkv, d, att);
        assertThat(bits(att)).isEqualTo(bits(want));
    }

    /** Prefill's conv row, a vector of channels at a time, against the scalar loop it replaced (tap order, then SiLU). */
    @ParameterizedTest
    @CsvSource({"6144,4,3", "100,4,5", "7,2,2"})
    void convRowHasTheScalarLoopsBits(int C, int K, int T) {
        var rnd = new Random(C * 7L + K * 3L + T);
        float[] cw = gauss(rnd, C * K), window = gauss(rnd, (K - 1 + T) * C), byTap = new float[K * C];
        for (int c = 0; c < C; c++) for (int j = 0; j < K; j++) byTap[j * C + c] = cw[c * K + j];
        float[] want = new float[T * C], out = new float[T * C];
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++) {
                float s = 0f;
                for (int j = 0; j < K; j++) s += cw[c * K + j] * window[(t + j) * C + c];
                want[t * C + c] = Qwen35Ops.silu(s);
            }
        for (int t = 0; t < T; t++) Qwen35Ops.convRow(byTap, window, t, C, K, out);
        assertThat(bits(out)).isEqualTo(bits(want));
    }

    @ParameterizedTest
    @CsvSource({"70,32,32", "64,16,24", "5,8,12", "130,20,36", "70,128,128", "66,72,81"})
    void chunkedFormHasThePlainLoopsBits(int T, int dk, int dv) {
        var rnd = new Random(T * 3L + dk * 11L + dv);
        float[] q = gauss(rnd, T * dk), k = gauss(rnd, T * dk), v = gauss(rnd, T * dv), S = gauss(rnd, dk * dv);
        float[] beta = new float[T], g = new float[T];
        for (int t = 0; t < T; t++) {
            beta[t] = rnd.nextFloat();
            g[t] = -0.1f * rnd.nextFloat();
        }
        float[] want = S.clone(), wantOut = new float[T * dv], out = new float[T * dv];
        plainChunked(q, k, v, beta, g, T, dk, dv, want, wantOut);
        GatedDeltaRule.chunked(q, k, v, beta, g, T, dk, dv, S, out);
        assertThat(bits(S)).isEqualTo(bits(want));
        assertThat(bits(out)).isEqualTo(bits(wantOut));
    }

    /** The chunked form as first written: every product's sum in its own scalar loop. */
    private static void plainChunked(float[] q, float[] k, float[] v, float[] beta, float[] g, int T, int dk, int dv, float[] S, float[] out) {
        float scale = (float) Math.pow(dk, -0.5);
        int C = GatedDeltaRule.CHUNK;
        var G = new float[C];
        var kb = new float[C * dk];
        var U = new float[C * dv];
        var W = new float[C * dk];
        var A = new float[C * C];
        var intra = new float[C * C];
        var qd = new float[C * dk];
        var kd = new float[C * dk];
        var vNew = new float[C * dv];
        var qs = new float[C * dk];
        for (int c0 = 0; c0 < T; c0 += C) {
            int n = Math.min(C, T - c0);
            float acc = 0f;
            for (int i = 0; i < n; i++) {
                acc += g[c0 + i];
                G[i] = acc;
            }
            for (int i = 0; i < n; i++) {
                int t = c0 + i;
                for (int a = 0; a < dk; a++) {
                    qs[i * dk + a] = q[t * dk + a] * scale;
                    kb[i * dk + a] = k[t * dk + a] * beta[t];
                }
                for (int b = 0; b < dv; b++) U[i * dv + b] = v[t * dv + b] * beta[t];
                float eg = (float) Math.exp(G[i]);
                for (int a = 0; a < dk; a++) W[i * dk + a] = kb[i * dk + a] * eg;
            }
            // A (strictly lower part used) and the intra-chunk attention (lower part with the diagonal)
            for (int i = 0; i < n; i++) {
                for (int j = 0; j <= i; j++) {
                    float d = (float) Math.exp(G[i] - G[j]);
                    float kk = 0f, qk = 0f;
                    int ti = c0 + i, tj = c0 + j;
                    for (int a = 0; a < dk; a++) {
                        kk += kb[i * dk + a] * k[tj * dk + a];
                        qk += qs[i * dk + a] * k[tj * dk + a];
                    }
                    A[i * C + j] = kk * d;
                    intra[i * C + j] = qk * d;
                }
            }
            // forward substitution with a unit diagonal, column by column as LAPACK's trsm does
            for (int j = 0; j < n; j++) {
                for (int i = j + 1; i < n; i++) {
                    float aij = A[i * C + j];
                    for (int b = 0; b < dv; b++) U[i * dv + b] -= aij * U[j * dv + b];
                    for (int a = 0; a < dk; a++) W[i * dk + a] -= aij * W[j * dk + a];
                }
            }
            float gl = G[n - 1];
            for (int i = 0; i < n; i++) {
                float eg = (float) Math.exp(G[i]);
                float el = (float) Math.exp(gl - G[i]);
                int t = c0 + i;
                for (int a = 0; a < dk; a++) {
                    qd[i * dk + a] = qs[i * dk + a] * eg;
                    kd[i * dk + a] = k[t * dk + a] * el;
                }
            }
            // V' = U − W·S
            for (int i = 0; i < n; i++) {
                for (int b = 0; b < dv; b++) {
                    float s = 0f;
                    for (int a = 0; a < dk; a++) s += W[i * dk + a] * S[a * dv + b];
                    vNew[i * dv + b] = U[i * dv + b] - s;
                }
            }
            // O = (Q⊙exp G)·S + intra·V'
            for (int i = 0; i < n; i++) {
                int t = c0 + i;
                for (int b = 0; b < dv; b++) {
                    float inter = 0f;
                    for (int a = 0; a < dk; a++) inter += qd[i * dk + a] * S[a * dv + b];
                    float local = 0f;
                    for (int j = 0; j <= i; j++) local += intra[i * C + j] * vNew[j * dv + b];
                    out[t * dv + b] = inter + local;
                }
            }
            // S ← exp(G_last)·S + (K⊙exp(G_last − G))ᵀ·V'
            float ed = (float) Math.exp(gl);
            for (int a = 0; a < dk; a++) {
                for (int b = 0; b < dv; b++) {
                    float s = 0f;
                    for (int i = 0; i < n; i++) s += kd[i * dk + a] * vNew[i * dv + b];
                    S[a * dv + b] = S[a * dv + b] * ed + s;
                }
            }
        }
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
