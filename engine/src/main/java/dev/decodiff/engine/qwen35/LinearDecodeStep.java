package dev.decodiff.engine.qwen35;

import dev.decodiff.metal.Parallel;
import dev.decodiff.metal.Transcendentals;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * A Gated DeltaNet layer's decode token between its input projections and out_proj, with no fault switched on and
 * nothing captured in between: the causal conv with SiLU and its state's shift, q/k's l2 norm, β and the log decay,
 * the delta rule's step on the state in place, and the gated RMSNorm. Every one of these is per channel or per head,
 * so one parallel call over the key heads does all of them (each task: its key head's q and k channels, the v
 * channels of its value heads, their states and outputs), where the op-by-op path ({@link Qwen35Ops#conv},
 * {@link Qwen35Ops#beta}, {@link Qwen35Ops#decay}, {@link Qwen35Ops#deltaRuleStep}, {@link Qwen35Ops#gatedOut}) ran
 * the conv, the split, the gates and the norm on one thread while the other waited, and allocated the conv's window,
 * q, k and v each token. Each value is computed by the same operations in the same order as there (the same bits).
 */
final class LinearDecodeStep {
    private static final VectorSpecies<Float> F = FloatVector.SPECIES_PREFERRED;
    private static final int L = F.length();

    private LinearDecodeStep() {}

    /**
     * The gated norm's output y [Hv·dv] (out_proj's input) of one token's projections (mixed [C], z [Hv·dv], b and a
     * [Hv]); convState [(K−1)·C] and S [Hv·dk·dv] are updated in place.
     */
    static float[] run(Qwen35Config cfg, Qwen35Weights.Linear w, float[] convState, float[] S, float[] mixed, float[] z, float[] b, float[] a) {
        int hk = cfg.linearKeyHeads(), hv = cfg.linearValueHeads(), dk = cfg.linearKeyDim(), dv = cfg.linearValueDim();
        float[] y = new float[hv * dv];
        Parallel.forRange(hk, 1, (k0, k1) -> {
            var scratch = new Scratch(dk, dv, hv / hk);
            for (int kh = k0; kh < k1; kh++) keyHead(cfg, w, kh, convState, S, mixed, z, b, a, y, scratch);
        });
        return y;
    }

    /** One task's buffers: its key head's normed q and k, its value heads' conv outputs and the delta rule's rows. */
    private record Scratch(float[] q, float[] k, float[] v, float[] core, float[] kv, float[] o, float[] gate) {
        Scratch(int dk, int dv, int r) { this(new float[dk], new float[dk], new float[r * dv], new float[dv], new float[dv], new float[dv], new float[dv]); }
    }

    private static void keyHead(Qwen35Config cfg, Qwen35Weights.Linear w, int kh, float[] convState, float[] S, float[] mixed, float[] z, float[] b,
                                float[] a, float[] y, Scratch s) {
        int C = cfg.convDim(), K = cfg.convKernel(), hk = cfg.linearKeyHeads(), hv = cfg.linearValueHeads();
        int dk = cfg.linearKeyDim(), dv = cfg.linearValueDim(), keyDim = cfg.keyDim(), r = hv / hk;
        float[] cw = w.convByTap();
        conv(cw, convState, mixed, C, K, kh * dk, dk, s.q, 0);
        conv(cw, convState, mixed, C, K, keyDim + kh * dk, dk, s.k, 0);
        conv(cw, convState, mixed, C, K, 2 * keyDim + kh * r * dv, r * dv, s.v, 0);
        l2norm(s.q, dk);
        l2norm(s.k, dk);
        float sqrtDk = (float) Math.sqrt(dk);
        float[] normW = w.norm();
        float eps = cfg.rmsNormEps();
        for (int rep = 0; rep < r; rep++) {
            int vh = kh * r + rep, o = vh * dv;
            float beta = Qwen35Ops.sigmoid(b[vh]);
            float negA = -(float) Math.exp(w.aLog()[vh]);
            float g = negA * Qwen35Ops.softplus(a[vh] + w.dtBias()[vh]);
            GatedDeltaRule.head(s.q, 0, s.k, 0, s.v, rep * dv, beta, g, vh * dk * dv, dk, dv, sqrtDk, S, s.core, 0, s.kv, s.o);
            // the gated RMSNorm of this head's output, as Qwen35Ops.gatedOut computes it in fp32
            double sq = 0;
            for (int j = 0; j < dv; j++) sq += (double) s.core[j] * s.core[j];
            float inv = (float) (1.0 / Math.sqrt((float) (sq / dv) + eps));
            Transcendentals.silu(z, o, dv, s.gate, 0);
            int j = 0;
            for (int bound = dv - dv % L; j < bound; j += L)
                FloatVector.fromArray(F, normW, j).mul(FloatVector.fromArray(F, s.core, j).mul(inv)).mul(FloatVector.fromArray(F, s.gate, j)).intoArray(y, o + j);
            for (; j < dv; j++) y[o + j] = normW[j] * (s.core[j] * inv) * s.gate[j];
        }
    }

    /**
     * Channels [c0, c0 + n) of the causal conv over [state | this token] with SiLU into out[off ..], and their state
     * shifted by one row (the oldest input dropped, this token's appended): each channel's taps summed in order, a
     * vector of channels at a time (the taps' weights by tap, so that a tap's weights for adjacent channels are one load).
     */
    private static void conv(float[] byTap, float[] state, float[] mixed, int C, int K, int c0, int n, float[] out, int off) {
        int i = 0;
        for (int bound = n - n % L; i < bound; i += L) {
            int c = c0 + i;
            var s = FloatVector.zero(F);
            for (int j = 0; j < K - 1; j++) s = s.add(FloatVector.fromArray(F, byTap, j * C + c).mul(FloatVector.fromArray(F, state, j * C + c)));
            var x = FloatVector.fromArray(F, mixed, c);
            s.add(FloatVector.fromArray(F, byTap, (K - 1) * C + c).mul(x)).intoArray(out, off + i);
            for (int j = 0; j < K - 2; j++) FloatVector.fromArray(F, state, (j + 1) * C + c).intoArray(state, j * C + c);
            if (K > 1) x.intoArray(state, (K - 2) * C + c);
        }
        for (; i < n; i++) {
            int c = c0 + i;
            float s = 0f;
            for (int j = 0; j < K - 1; j++) s += byTap[j * C + c] * state[j * C + c];
            s += byTap[(K - 1) * C + c] * mixed[c];
            out[off + i] = s;
            for (int j = 0; j < K - 2; j++) state[j * C + c] = state[(j + 1) * C + c];
            if (K > 1) state[(K - 2) * C + c] = mixed[c];
        }
        Transcendentals.silu(out, off, n, out, off);
    }

    /** Qwen35Ops's q/k l2 norm over x[0, n): x·rsqrt(Σx² + 1e-6), the sum in double. */
    private static void l2norm(float[] x, int n) {
        double s = 0;
        for (int j = 0; j < n; j++) s += (double) x[j] * x[j];
        float inv = (float) (1.0 / Math.sqrt((float) s + 1e-6f));
        for (int j = 0; j < n; j++) x[j] *= inv;
    }
}
