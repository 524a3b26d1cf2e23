package dev.decodiff.harness.ops;

/**
 * An independent implementation of each kernel's math, computed in float64 from the same fp32 inputs. Plain arrays
 * only: the one implementation ({@code Nd4jOracle}) is the only class that touches ND4J, so nothing else loads it.
 * Every result is row-major; shapes are given by the arguments.
 */
public interface Oracle {
    /** "ND4J 1.0.0-M2.1 (CpuBackend, …)". */
    String describe();

    /** Seconds the oracle took to start (ND4J loads its native library and OpenBLAS). */
    double initSeconds();

    /** x rounded by the oracle to a storage dtype ("bf16" or "f16") and widened back to fp32. */
    float[] roundTo(String dtype, float[] x);

    /** Y[t, r] = Σ_c W[r, c]·X[t, c]: torch's Linear (y = x·Wᵀ); W is [rows, cols], X is [tokens, cols]. */
    double[] linear(float[] w, int rows, int cols, float[] x, int tokens);

    /** Each of the {@code rows} rows of n: x·(mean(x²)+eps)^(−1/2), times w when w is not null. */
    double[] rmsNorm(float[] x, int rows, int n, float[] w, double eps);

    /**
     * RoPE (rotate-half over the whole head) of x [tokens, heads, d], token t at position pos[t]. inv_freq and the
     * angle float(p)·inv_freq are formed in fp32 as transformers does ("default": θ^(−2j/d) for every pair;
     * "proportional": the first ⌊partial·d/2⌋ pairs get θ^(−2j/d)/factor, the rest 0); cos, sin and the rotation
     * are float64.
     */
    double[] rope(float[] x, int tokens, int heads, int d, int[] pos, String type, double theta, double partial, double factor);

    /** Softmax of each of the {@code rows} rows of n. */
    double[] softmax(float[] x, int rows, int n);

    /**
     * One query position: q [nh, d], K and V [ctx, nkv, d]; head h reads KV head h/(nh/nkv);
     * out[h] = softmax(scale·K_g·q_h)·V_g, [nh, d].
     */
    double[] attention(float[] q, int nh, float[] k, float[] v, int ctx, int nkv, int d, double scale);

    /** gelu_pytorch_tanh: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))). */
    double[] geluTanh(float[] x);
}
