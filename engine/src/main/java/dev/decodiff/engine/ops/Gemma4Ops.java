package dev.decodiff.engine.ops;

import dev.decodiff.engine.Gemma4Config;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.engine.LayerSpec;
import dev.decodiff.engine.LayerType;
import dev.decodiff.engine.LayerWeights;
import dev.decodiff.engine.ModelWeights;
import dev.decodiff.engine.Rope;
import dev.decodiff.metal.Transcendentals;
import dev.decodiff.metal.VectorMath;
import dev.decodiff.metal.WeightMatrix;

/**
 * Gemma 4's ops, one method per node of {@link OpGraph}, each recomputing one capture point from its inputs with the
 * checkpoint's weights (Gemma 4's math as transformers computes it, with the engine's kernels). Every op takes a {@link Precision}: with
 * {@link Precision#EXACT} it is the exact fp32 op (the same kernels and order as the engine's forward, so the engine's
 * own tensors recompute to the bit or to fp32 noise); any other precision rounds where that kind of engine rounds.
 * Attribution (what an op added to the candidate's error), precision hypotheses and bisect's variants all call these.
 */
public final class Gemma4Ops {
    private final Gemma4Config cfg;
    private final ModelWeights w;
    private final Gemma4Model model;
    private volatile float[] geluTable;

    public Gemma4Ops(Gemma4Model model) {
        this.model = model;
        this.cfg = model.config();
        this.w = model.weights();
    }

    public Gemma4Config config() { return cfg; }

    // ---- embed, ple ------------------------------------------------------------------------------------------

    /** embed = E[id]·√H; a bf16 engine multiplies by √H rounded to bf16. */
    public float[] embed(int[] tokens, Precision p) {
        int T = tokens.length, H = cfg.hidden();
        float[] x = new float[T * H];
        float scale = p.activations().round((float) Math.sqrt(H));
        for (int t = 0; t < T; t++) {
            w.embed().row(tokens[t], x, t * H);
            VectorMath.scale(x, t * H, H, scale);
        }
        return act(x, p);
    }

    /** ple [T, L, P] from the tokens and the scaled embedding. */
    public float[] ple(int[] tokens, float[] embed, Precision p) {
        int T = tokens.length, H = cfg.hidden(), L = cfg.numLayers(), P = cfg.pleDim(), LP = L * P;
        var f = p.activations();
        float[] proj = linear(w.pleModelProjection(), embed, T, null, p);
        float projScale = (float) StrictMath.pow(H, -0.5);
        float tokScale = f.round((float) Math.sqrt(P));
        float combine = (float) StrictMath.pow(2.0, -0.5);
        float[] tok = new float[LP];
        for (int t = 0; t < T; t++) {
            w.pleEmbed().row(tokens[t], tok, 0);
            for (int j = 0; j < LP; j++) tok[j] = f.round(tok[j] * tokScale);
            int base = t * LP;
            for (int j = 0; j < LP; j++) proj[base + j] = f.round(proj[base + j] * projScale);
            for (int l = 0; l < L; l++) norm(proj, base + l * P, P, w.pleProjectionNorm(), proj, base + l * P, p);
            for (int j = 0; j < LP; j++) proj[base + j] = f.round(f.round(proj[base + j] + tok[j]) * combine);
        }
        return proj;
    }

    // ---- attention -------------------------------------------------------------------------------------------

    /** q, k, v of one layer's rows (k and v null on a KV-shared layer). */
    public record Qkv(float[] q, float[] k, float[] v) {}

    /**
     * q = RoPE(q_norm(h·Wq)), k = RoPE(k_norm(h·Wk)), v = v_norm(h·Wv) (k_eq_v full layers: v from the raw k
     * projection) with h = input_layernorm(x), for T rows at positions start….
     */
    public Qkv qkv(int layer, float[] x, int T, int start, Precision p) {
        var spec = cfg.layer(layer);
        var lw = w.layers().get(layer);
        int H = cfg.hidden(), nh = cfg.numHeads(), d = spec.headDim(), nkv = spec.kvHeads();
        float[] h = new float[T * H];
        rowsNorm(x, T, H, lw.inputNorm(), h, p);
        Rope rope = model.rope(spec.type());
        float[] q = linear(lw.q(), h, T, lw.qBias(), p);
        for (int t = 0; t < T; t++) {
            for (int hd = 0; hd < nh; hd++) norm(q, t * nh * d + hd * d, d, lw.qNorm(), q, t * nh * d + hd * d, p);
            rope(rope, q, t * nh * d, nh, d, start + t, p);
        }
        if (spec.kvShared()) return new Qkv(q, null, null);
        float[] k = linear(lw.k(), h, T, lw.kBias(), p);
        float[] v = spec.kEqV() ? k.clone() : linear(lw.v(), h, T, lw.vBias(), p);
        int stride = nkv * d;
        for (int t = 0; t < T; t++) {
            for (int kh = 0; kh < nkv; kh++) {
                int o = t * stride + kh * d;
                norm(v, o, d, null, v, o, p);
                norm(k, o, d, lw.kNorm(), k, o, p);
            }
            rope(rope, k, t * stride, nkv, d, start + t, p);
        }
        return new Qkv(q, k, v);
    }

    /** The rows a cache hands back when it stores them in {@code store} (k_read / v_read of a lossy cache). */
    public static float[] stored(float[] rows, int stride, Precision.KvStore store) {
        if (store == Precision.KvStore.F32) return rows;
        float[] out = rows.clone();
        switch (store) {
            case F32 -> {}
            case BF16 -> Format.BF16.round(out);
            case F16 -> Format.F16.round(out);
            default -> {
                if (stride % dev.decodiff.engine.KvType.BLOCK != 0 || out.length % stride != 0) return rows; // not blockable: ggml would not either
                store.kvType().roundTrip(out, 0, out.length / stride, stride);
            }
        }
        return out;
    }

    /**
     * Keys and values by absolute position for one layer's attention: rows [base, base + known.length), each row
     * [nkv, d]; a row not {@code known} cannot be read, and a query that needs it is not recomputed.
     */
    public record KeyValues(int base, float[] k, float[] v, boolean[] known) {}

    /**
     * attn.out [T, nh·d] = softmax(q·kᵀ)·v per head over the positions each row may see (causal; the sliding window on
     * sliding layers), before o_proj. Rows whose keys are not all known come back as NaN; {@code rowsDone} (when
     * given) is set per row.
     */
    public float[] attention(int layer, float[] q, int T, int start, KeyValues kv, Precision p, boolean[] rowsDone) {
        var spec = cfg.layer(layer);
        int nh = cfg.numHeads(), d = spec.headDim(), nkv = spec.kvHeads(), stride = nkv * d, qDim = nh * d;
        boolean sliding = spec.type() == LayerType.SLIDING;
        int window = cfg.slidingWindow();
        var f = p.activations();
        var kernel = p.attention();
        boolean flash = kernel == Precision.Attention.GGML_FLASH;
        // ggml's flash attention casts an F32 cache's K and V to f16 and reads other types as they are stored
        var kStore = flash && p.keys() == Precision.KvStore.F32 ? Precision.KvStore.F16 : p.keys();
        var vStore = flash && p.values() == Precision.KvStore.F32 ? Precision.KvStore.F16 : p.values();
        float[] keys = stored(kv.k(), stride, kStore);
        float[] values = stored(kv.v(), stride, vStore);
        float[] qq = switch (kernel) {
            case EXACT -> q;
            case GGML, GGML_FLASH -> stored(q, d, kStore.vecDot());
        };
        boolean f16Accumulator = flash && vStore == Precision.KvStore.F16;
        float[] out = new float[T * qDim];
        int group = nh / nkv;
        for (int t = 0; t < T; t++) {
            int pos = start + t;
            int lo = sliding ? Math.max(0, pos - window + 1) : 0;
            boolean ok = lo >= kv.base() && pos - kv.base() < kv.known().length;
            for (int j = lo; ok && j <= pos; j++) ok = kv.known()[j - kv.base()];
            if (rowsDone != null) rowsDone[t] = ok;
            if (!ok) {
                java.util.Arrays.fill(out, t * qDim, (t + 1) * qDim, Float.NaN);
                continue;
            }
            int n = pos - lo + 1;
            float[] s = new float[n];
            for (int hd = 0; hd < nh; hd++) {
                int g = hd / group, qo = t * qDim + hd * d;
                for (int j = 0; j < n; j++) s[j] = VectorMath.dot(qq, qo, keys, (lo + j - kv.base()) * stride + g * d, d);
                if (flash) {
                    flash(s, n, values, (lo - kv.base()) * stride + g * d, stride, d, out, qo, f16Accumulator);
                } else if (f == Format.F32) {
                    VectorMath.softmax(s, 0, n);
                    if (kernel == Precision.Attention.GGML) s = stored(s, n, p.values().vecDot());
                    for (int j = 0; j < n; j++) VectorMath.axpy(s[j], values, (lo + j - kv.base()) * stride + g * d, out, qo, d);
                } else {
                    // a half-precision framework: scores and their sum in fp32, the exponentials rounded before P·V
                    float max = Float.NEGATIVE_INFINITY;
                    for (int j = 0; j < n; j++) max = Math.max(max, s[j]);
                    double sum = 0;
                    for (int j = 0; j < n; j++) {
                        float e = (float) Math.exp(s[j] - max);
                        sum += e;
                        s[j] = f.round(e);
                    }
                    for (int j = 0; j < n; j++) VectorMath.axpy(s[j], values, (lo + j - kv.base()) * stride + g * d, out, qo, d);
                    float inv = (float) (1.0 / sum);
                    for (int x = 0; x < d; x++) out[qo + x] = f.round(out[qo + x] * inv);
                }
            }
        }
        return out;
    }

    /**
     * ggml-cpu's flash attention for one query head: an online softmax over the keys in order, the weighted values
     * accumulated in an fp16 vector when V is f16 (each multiply-add and each rescale rounded to fp16; in fp32
     * otherwise), divided by the fp32 sum last.
     */
    private static void flash(float[] s, int n, float[] values, int vOff, int stride, int d, float[] out, int qo, boolean f16) {
        var acc16 = f16 ? Format.F16 : Format.F32;
        float[] acc = new float[d];
        float m = Float.NEGATIVE_INFINITY, sum = 0;
        for (int j = 0; j < n; j++) {
            float mOld = m, ms = 1f, vs;
            if (s[j] > m) {
                m = s[j];
                ms = (float) Math.exp(mOld - m);
                for (int x = 0; x < d; x++) acc[x] = acc16.round(acc[x] * ms);
                vs = 1f;
            } else {
                vs = (float) Math.exp(s[j] - m);
            }
            int o = vOff + j * stride;
            for (int x = 0; x < d; x++) acc[x] = acc16.round(Math.fma(values[o + x], vs, acc[x])); // ggml's vector FMA
            sum = sum * ms + vs;
        }
        float inv = 1f / sum;
        for (int x = 0; x < d; x++) out[qo + x] = acc[x] * inv;
    }

    // ---- after attention -------------------------------------------------------------------------------------

    /** The residual after attention: x + post_attention_layernorm(attn.out·Woᵀ). */
    public float[] postAttention(int layer, float[] x, float[] attnOut, int T, Precision p) {
        var lw = w.layers().get(layer);
        int H = cfg.hidden();
        float[] a = linear(lw.o(), attnOut, T, lw.oBias(), p);
        rowsNorm(a, T, H, lw.postAttentionNorm(), a, p);
        float[] r = new float[T * H];
        var f = p.activations();
        for (int j = 0; j < r.length; j++) r[j] = f.round(x[j] + a[j]);
        return r;
    }

    /** mlp.out = W_down·(gelu(W_gate·u) ⊙ W_up·u), u = pre_feedforward_layernorm(residual). */
    public float[] mlp(int layer, float[] residual, int T, Precision p) {
        var lw = w.layers().get(layer);
        int H = cfg.hidden();
        float[] u = new float[T * H];
        rowsNorm(residual, T, H, lw.preFeedforwardNorm(), u, p);
        float[] g = linear(lw.gate(), u, T, null, p);
        float[] up = linear(lw.up(), u, T, null, p);
        geluTimes(g, up, 0, g.length, p);
        return linear(lw.down(), g, T, null, p);
    }

    /**
     * moe.out on the post-attention residual: router (norm, scale, softmax, top-k renormalised, per-expert
     * scale), experts on pre_feedforward_layernorm_2(residual), summed in expert order.
     */
    public float[] moe(int layer, float[] residual, int T, Precision p) {
        var m = w.layers().get(layer).moe();
        int H = cfg.hidden(), E = cfg.numExperts(), K = cfg.topKExperts(), Im = cfg.moeIntermediate();
        var f = p.activations();
        float rootScale = (float) StrictMath.pow(H, -0.5);
        float[] z = new float[T * H];
        for (int t = 0; t < T; t++) {
            norm(residual, t * H, H, null, z, t * H, p);
            for (int j = 0; j < H; j++) z[t * H + j] = f.round(f.round(z[t * H + j] * m.routerScale()[j]) * rootScale);
        }
        // GGUF converters keep the router's matrix in F32 whatever the type, so a half-precision matmul input is not its
        float[] logits = linear(m.router(), z, T, null, p.withMatmulInput(Format.F32));
        float[] u = new float[T * H];
        rowsNorm(residual, T, H, m.preFeedforwardNorm2(), u, p);
        float[] out = new float[T * H];
        float[] gu = new float[2 * Im], act = new float[Im], y = new float[H];
        for (int t = 0; t < T; t++) {
            int o = t * E;
            VectorMath.softmax(logits, o, E);
            int[] top = topK(logits, o, E, K);
            float sum = 0;
            for (int e : top) sum += logits[o + e];
            float[] weight = new float[E];
            boolean[] chosen = new boolean[E];
            for (int e : top) {
                weight[e] = f.round(logits[o + e] / sum * m.perExpertScale()[e]);
                chosen[e] = true;
            }
            float[] ut = java.util.Arrays.copyOfRange(u, t * H, (t + 1) * H);
            for (int e = 0; e < E; e++) {
                if (!chosen[e]) continue;
                var ep = p.withMatmulInput(p.experts());
                float[] in = matmulInput(ut, ep);
                m.gateUp()[e].matmul(in, 1, gu);
                act(gu, p);
                float[] gate = java.util.Arrays.copyOf(gu, Im), upv = java.util.Arrays.copyOfRange(gu, Im, 2 * Im);
                geluTimes(gate, upv, 0, Im, p);
                System.arraycopy(gate, 0, act, 0, Im);
                m.down()[e].matmul(matmulInput(act, ep), 1, y);
                act(y, p);
                for (int j = 0; j < H; j++) out[t * H + j] = f.round(out[t * H + j] + f.round(weight[e] * y[j]));
            }
        }
        return out;
    }

    /**
     * out = layer_scalar·(residual + post_feedforward_layernorm(m) [+ per-layer-input branch]) where m is mlp.out, or
     * with MoE post_feedforward_layernorm_1(mlp.out) + post_feedforward_layernorm_2(moe.out).
     */
    public float[] layerOut(int layer, float[] residual, float[] mlpOut, float[] moeOut, float[] ple, int T, Precision p) {
        var lw = w.layers().get(layer);
        int H = cfg.hidden();
        var f = p.activations();
        float[] m = mlpOut.clone();
        if (lw.moe() != null) {
            float[] e = moeOut.clone();
            rowsNorm(m, T, H, lw.moe().postFeedforwardNorm1(), m, p);
            rowsNorm(e, T, H, lw.moe().postFeedforwardNorm2(), e, p);
            for (int j = 0; j < m.length; j++) m[j] = f.round(m[j] + e[j]);
        }
        rowsNorm(m, T, H, lw.postFeedforwardNorm(), m, p);
        float[] x = new float[T * H];
        for (int j = 0; j < x.length; j++) x[j] = f.round(residual[j] + m[j]);
        if (ple != null) {
            int P = cfg.pleDim(), L = cfg.numLayers();
            float[] g = linear(lw.pleGate(), x, T, null, p.withMatmulInput(p.pleGate()));
            float[] pl = new float[T * P];
            for (int t = 0; t < T; t++) System.arraycopy(ple, (t * L + layer) * P, pl, t * P, P);
            geluTimes(g, pl, 0, g.length, p);
            float[] pr = linear(lw.pleProjection(), g, T, null, p);
            rowsNorm(pr, T, H, lw.plePostNorm(), pr, p);
            for (int j = 0; j < x.length; j++) x[j] = f.round(x[j] + pr[j]);
        }
        float s = lw.layerScalar();
        for (int j = 0; j < x.length; j++) x[j] = f.round(x[j] * s);
        return x;
    }

    /** final_norm of the last layer's out. */
    public float[] finalNorm(float[] lastOut, int T, Precision p) {
        int H = cfg.hidden();
        float[] out = new float[T * H];
        rowsNorm(lastOut, T, H, w.finalNorm(), out, p);
        return out;
    }

    /** logits [V] of the last row of final_norm: the tied head, then the soft-cap. */
    public float[] logits(float[] finalNorm, int T, Precision p) {
        int H = cfg.hidden();
        float[] last = matmulInput(java.util.Arrays.copyOfRange(finalNorm, (T - 1) * H, T * H), p);
        float[] logits = new float[cfg.vocabSize()];
        w.lmHead().matvec(last, 0, logits, 0);
        act(logits, p);
        if (cfg.hasSoftcap()) {
            float c = cfg.finalLogitSoftcap();
            var f = p.activations();
            if (f == Format.F32) Transcendentals.softcap(logits, 0, logits.length, c);
            else for (int j = 0; j < logits.length; j++) logits[j] = f.round(f.round((float) Math.tanh(f.round(logits[j] / c))) * c);
        }
        return logits;
    }

    // ---- the sub-ops, where each kind of engine rounds ------------------------------------------------------

    private static float[] act(float[] a, Precision p) {
        p.activations().round(a, 0, a.length);
        return a;
    }

    private static float[] matmulInput(float[] x, Precision p) {
        return p.matmulInput() == Format.F32 ? x : p.matmulInput().round(x.clone());
    }

    private static float[] linear(WeightMatrix m, float[] x, int T, float[] bias, Precision p) {
        float[] y = new float[T * m.rows()];
        m.matmul(matmulInput(x, p), T, y);
        if (bias != null) for (int t = 0; t < T; t++) VectorMath.add(y, t * bias.length, bias, 0, bias.length);
        return act(y, p);
    }

    private void norm(float[] x, int off, int n, float[] weight, float[] out, int outOff, Precision p) {
        VectorMath.rmsNorm(x, off, n, weight, cfg.rmsNormEps(), out, outOff);
        p.activations().round(out, outOff, n);
    }

    private void rowsNorm(float[] in, int T, int n, float[] weight, float[] out, Precision p) {
        for (int t = 0; t < T; t++) norm(in, t * n, n, weight, out, t * n, p);
    }

    /** RoPE of {@code heads} vectors at x[off…]; a half-precision framework rounds cos/sin and each product. */
    private static void rope(Rope rope, float[] x, int off, int heads, int d, int pos, Precision p) {
        var f = p.activations();
        if (f == Format.F32) {
            rope.apply(x, off, heads, pos);
            return;
        }
        float[] inv = rope.invFreq();
        int half = d / 2;
        float fp = (float) pos;
        for (int j = 0; j < half; j++) {
            float angle = fp * inv[j];
            float c = f.round((float) StrictMath.cos(angle)), s = f.round((float) StrictMath.sin(angle));
            for (int h = 0; h < heads; h++) {
                int b = off + h * d;
                float x1 = x[b + j], x2 = x[b + j + half];
                x[b + j] = f.round(f.round(x1 * c) - f.round(x2 * s));
                x[b + j + half] = f.round(f.round(x2 * c) + f.round(x1 * s));
            }
        }
    }

    /** g[i] = gelu(g[i])·u[i] over [from, to): exact tanh GELU, or ggml's fp16 table; rounded as the engine does. */
    private void geluTimes(float[] g, float[] u, int from, int to, Precision p) {
        var f = p.activations();
        if (!p.geluTable() && f == Format.F32) {
            Transcendentals.geluTanhTimes(g, u, from, to);
            return;
        }
        float[] table = p.geluTable() ? geluTable() : null;
        for (int i = from; i < to; i++) {
            float x = g[i], y;
            if (table == null) y = f.round(VectorMath.geluTanh(x));
            else if (x <= -10f) y = 0f;
            else if (x >= 10f) y = x;
            else y = table[Format.f16Bits(x) & 0xFFFF];
            g[i] = f.round(y * u[i]);
        }
    }

    /** ggml's table: for every fp16 x, gelu(x) evaluated in fp32 and stored as fp16. */
    private float[] geluTable() {
        float[] t = geluTable;
        if (t != null) return t;
        t = new float[65536];
        for (int i = 0; i < 65536; i++) t[i] = Float.float16ToFloat(Float.floatToFloat16(ggmlGelu(Float.float16ToFloat((short) i))));
        return geluTable = t;
    }

    /** ggml's gelu in fp32 arithmetic. */
    private static float ggmlGelu(float x) {
        final float sqrt2OverPi = 0.79788456080286535587989211986876f, coefA = 0.044715f;
        return 0.5f * x * (1.0f + (float) Math.tanh(sqrt2OverPi * x * (1.0f + coefA * x * x)));
    }

    /** The indices of the k largest of p[off .. off+n), largest first (the first of equals first). */
    static int[] topK(float[] p, int off, int n, int k) {
        int[] idx = new int[k];
        boolean[] used = new boolean[n];
        for (int j = 0; j < k; j++) {
            int best = -1;
            for (int e = 0; e < n; e++) if (!used[e] && (best < 0 || p[off + e] > p[off + best])) best = e;
            used[best] = true;
            idx[j] = best;
        }
        return idx;
    }

    /** The layer's geometry (for callers that shape tensors). */
    public LayerSpec layer(int i) { return cfg.layer(i); }

    /** The layer's weights (for callers that rewire an op's weights). */
    public LayerWeights weights(int i) { return w.layers().get(i); }
}
