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

import java.util.ArrayList;

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
    private final StoredTypes stored;
    private volatile float[] geluTable;

    public Gemma4Ops(Gemma4Model model) {
        this.model = model;
        this.cfg = model.config();
        this.w = model.weights();
        this.stored = StoredTypes.read(model.directory(), w);
    }

    /** Whether the folder says which ggml type each matrix had (a GGUF's folder), so quantized inputs follow each one's. */
    public boolean knowsStoredTypes() { return stored.known(); }

    public Gemma4Config config() { return cfg; }

    // ---- embed, ple ------------------------------------------------------------------------------------------

    /** embed = E[id]·√H; a bf16 engine multiplies by √H rounded to bf16. */
    public float[] embed(int[] tokens, Precision p) {
        int T = tokens.length, H = cfg.hidden();
        float[] x = new float[T * H];
        float scale = p.activations().round((float) Math.sqrt(H));
        for (int t = 0; t < T; t++) {
            tableRow(w.embed(), tokens[t], x, t * H, p);
            VectorMath.scale(x, t * H, H, scale);
        }
        return act(x, p);
    }

    /** ple [T, L, P] from the tokens and the scaled embedding. */
    public float[] ple(int[] tokens, float[] embed, Precision p) { return ple(tokens, embed, p, Rewire.NONE); }

    /** ple under a rewiring (its scales, its norm, the projection branch). */
    public float[] ple(int[] tokens, float[] embed, Precision p, Rewire r) {
        int T = tokens.length, H = cfg.hidden(), L = cfg.numLayers(), P = cfg.pleDim(), LP = L * P;
        var f = p.activations();
        float[] proj = linear(w.pleModelProjection(), embed, T, null, p);
        float projScale = r.has(Rewire.Wire.PLE_PROJECTION_SCALE_MISSING) ? 1f : (float) StrictMath.pow(H, -0.5);
        float tokScale = r.has(Rewire.Wire.PLE_TABLE_SCALE_MISSING) ? 1f : f.round((float) Math.sqrt(P));
        float combine = r.has(Rewire.Wire.PLE_COMBINE_MISSING) ? 1f : (float) StrictMath.pow(2.0, -0.5);
        if (r.has(Rewire.Wire.PLE_TABLE_ONLY)) java.util.Arrays.fill(proj, 0f);
        float[] tok = new float[LP];
        for (int t = 0; t < T; t++) {
            tableRow(w.pleEmbed(), tokens[t], tok, 0, p);
            for (int j = 0; j < LP; j++) tok[j] = f.round(tok[j] * tokScale);
            int base = t * LP;
            for (int j = 0; j < LP; j++) proj[base + j] = f.round(proj[base + j] * projScale);
            if (!r.has(Rewire.Wire.PLE_PROJECTION_NORM_SKIPPED) && !r.has(Rewire.Wire.PLE_TABLE_ONLY))
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
    public Qkv qkv(int layer, float[] x, int T, int start, Precision p) { return qkv(layer, x, T, start, p, Rewire.NONE); }

    /** q, k, v under a rewiring of their norms, RoPE and where the value is taken. */
    public Qkv qkv(int layer, float[] x, int T, int start, Precision p, Rewire r) {
        var spec = cfg.layer(layer);
        var lw = w.layers().get(r.weightsLayer() < 0 ? layer : r.weightsLayer());
        int H = cfg.hidden(), nh = cfg.numHeads(), d = spec.headDim(), nkv = spec.kvHeads();
        float[] h = new float[T * H];
        if (r.has(Rewire.Wire.INPUT_NORM_SKIPPED)) System.arraycopy(x, 0, h, 0, h.length);
        else rowsNorm(x, T, H, r.has(Rewire.Wire.INPUT_NORM_ONE_PLUS) ? onePlus(lw.inputNorm()) : lw.inputNorm(), h, p);
        Rope rope = model.rope(spec.type());
        float[] q = linear(lw.q(), h, T, lw.qBias(), p);
        float[] qNorm = r.has(Rewire.Wire.Q_NORM_ONE_PLUS) ? onePlus(lw.qNorm()) : r.has(Rewire.Wire.Q_NORM_K_WEIGHTS) ? lw.kNorm() : lw.qNorm();
        boolean qNormed = !r.has(Rewire.Wire.Q_NORM_SKIPPED), qRopeFirst = r.has(Rewire.Wire.Q_ROPE_BEFORE_NORM);
        for (int t = 0; t < T; t++) {
            if (qRopeFirst) rope(rope, q, t * nh * d, nh, d, start + t, p);
            for (int hd = 0; hd < nh && qNormed; hd++) {
                norm(q, t * nh * d + hd * d, d, qNorm, q, t * nh * d + hd * d, p);
                if (r.has(Rewire.Wire.Q_NORM_TWICE)) norm(q, t * nh * d + hd * d, d, qNorm, q, t * nh * d + hd * d, p);
            }
            if (!qRopeFirst) rope(rope, q, t * nh * d, nh, d, start + t, p);
        }
        if (spec.kvShared()) return new Qkv(q, null, null);
        float[] k = linear(lw.k(), h, T, lw.kBias(), p);
        float[] v = spec.kEqV() ? k.clone() : linear(lw.v(), h, T, lw.vBias(), p);
        float[] kNorm = r.has(Rewire.Wire.K_NORM_ONE_PLUS) ? onePlus(lw.kNorm()) : r.has(Rewire.Wire.K_NORM_Q_WEIGHTS) ? lw.qNorm() : lw.kNorm();
        float[] vNorm = r.has(Rewire.Wire.V_NORM_K_WEIGHTS) ? lw.kNorm() : null;
        boolean kNormed = !r.has(Rewire.Wire.K_NORM_SKIPPED), vNormed = !r.has(Rewire.Wire.V_NORM_SKIPPED), kRopeFirst = r.has(Rewire.Wire.K_ROPE_BEFORE_NORM);
        int stride = nkv * d;
        for (int t = 0; t < T; t++) {
            if (kRopeFirst) rope(rope, k, t * stride, nkv, d, start + t, p);
            for (int kh = 0; kh < nkv; kh++) {
                int o = t * stride + kh * d;
                if (vNormed) norm(v, o, d, vNorm, v, o, p);
                if (kNormed) norm(k, o, d, kNorm, k, o, p);
                if (kNormed && r.has(Rewire.Wire.K_NORM_TWICE)) norm(k, o, d, kNorm, k, o, p);
            }
            if (spec.kEqV() && r.has(Rewire.Wire.V_AFTER_K_NORM)) System.arraycopy(k, t * stride, v, t * stride, stride);
            if (!kRopeFirst) rope(rope, k, t * stride, nkv, d, start + t, p);
            if (spec.kEqV() && r.has(Rewire.Wire.V_AFTER_K_ROPE)) System.arraycopy(k, t * stride, v, t * stride, stride);
        }
        return new Qkv(q, k, v);
    }

    private static float[] onePlus(float[] w) {
        if (w == null) return null;
        float[] o = new float[w.length];
        for (int i = 0; i < w.length; i++) o[i] = 1 + w[i];
        return o;
    }

    /** The rows a cache hands back when it stores them in {@code store} (k_read / v_read of a lossy cache). */
    public static float[] stored(float[] rows, int stride, Precision.KvStore store) { return store.readBack(rows, stride); }

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
        return attention(layer, q, T, start, kv, p, Rewire.NONE, rowsDone);
    }

    /**
     * attn.out under a rewiring: the score scale and soft-cap, the mask, the window's length, the softmax, the KV head
     * a query head reads. Positions past the last known row are not seen (a mask that opens past the step's last
     * query sees up to the last known key).
     */
    public float[] attention(int layer, float[] q, int T, int start, KeyValues kv, Precision p, Rewire r, boolean[] rowsDone) {
        var spec = cfg.layer(layer);
        int nh = cfg.numHeads(), d = spec.headDim(), nkv = spec.kvHeads(), stride = nkv * d, qDim = nh * d;
        boolean sliding = spec.type() == LayerType.SLIDING;
        int window = cfg.slidingWindow() + r.windowShift();
        if (r.mask() == Rewire.Mask.NO_WINDOW) sliding = false;
        int last = start + T - 1;
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
            int hi = switch (r.mask()) {
                case CAUSAL, NO_WINDOW -> pos;
                case NO_CAUSAL_IN_PREFILL -> last;
                case NONE -> { lo = 0; yield last; }
            };
            boolean ok = lo >= kv.base() && hi - kv.base() < kv.known().length;
            for (int j = lo; ok && j <= hi; j++) ok = kv.known()[j - kv.base()];
            if (rowsDone != null) rowsDone[t] = ok;
            if (!ok) {
                java.util.Arrays.fill(out, t * qDim, (t + 1) * qDim, Float.NaN);
                continue;
            }
            int n = hi - lo + 1;
            float[] s = new float[n];
            for (int hd = 0; hd < nh; hd++) {
                int g = r.has(Rewire.Wire.KV_HEAD_MODULO) ? hd % nkv : hd / group, qo = t * qDim + hd * d;
                for (int j = 0; j < n; j++) s[j] = VectorMath.dot(qq, qo, keys, (lo + j - kv.base()) * stride + g * d, d);
                if (r.scoreScale() != 1.0) for (int j = 0; j < n; j++) s[j] = (float) (s[j] * r.scoreScale());
                if (!Double.isNaN(r.scoreSoftcap())) for (int j = 0; j < n; j++) s[j] = (float) (r.scoreSoftcap() * Math.tanh(s[j] / r.scoreSoftcap()));
                if (r.has(Rewire.Wire.SOFTMAX_EXTRA_ZERO_LOGIT) || r.has(Rewire.Wire.SOFTMAX_UNNORMALISED)) {
                    float max = Float.NEGATIVE_INFINITY;
                    for (int j = 0; j < n; j++) max = Math.max(max, s[j]);
                    double sum = r.has(Rewire.Wire.SOFTMAX_EXTRA_ZERO_LOGIT) ? Math.exp(-max) : 0;
                    for (int j = 0; j < n; j++) sum += s[j] = (float) Math.exp(s[j] - max);
                    if (r.has(Rewire.Wire.SOFTMAX_UNNORMALISED)) sum = 1;
                    for (int j = 0; j < n; j++) s[j] = (float) (s[j] / sum);
                    for (int j = 0; j < n; j++) VectorMath.axpy(s[j], values, (lo + j - kv.base()) * stride + g * d, out, qo, d);
                } else if (flash) {
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
    public float[] postAttention(int layer, float[] x, float[] attnOut, int T, Precision p) { return postAttention(layer, x, attnOut, T, p, Rewire.NONE); }

    /** The residual after attention under a rewiring (post_attention_layernorm dropped, the branch not added). */
    public float[] postAttention(int layer, float[] x, float[] attnOut, int T, Precision p, Rewire rw) {
        if (rw.has(Rewire.Wire.MLP_READS_LAYER_INPUT)) return x.clone();
        var lw = w.layers().get(rw.weightsLayer() < 0 ? layer : rw.weightsLayer());
        int H = cfg.hidden();
        float[] a = linear(lw.o(), attnOut, T, lw.oBias(), p);
        if (!rw.has(Rewire.Wire.POST_ATTENTION_NORM_SKIPPED)) rowsNorm(a, T, H, lw.postAttentionNorm(), a, p);
        float[] r = new float[T * H];
        var f = p.activations();
        for (int j = 0; j < r.length; j++) r[j] = f.round(x[j] + a[j]);
        return r;
    }

    /** mlp.out = W_down·(gelu(W_gate·u) ⊙ W_up·u), u = pre_feedforward_layernorm(residual). */
    public float[] mlp(int layer, float[] residual, int T, Precision p) { return mlp(layer, residual, T, p, Rewire.NONE); }

    /** mlp.out under a rewiring (pre_feedforward_layernorm dropped, another layer's weights). */
    public float[] mlp(int layer, float[] residual, int T, Precision p, Rewire rw) {
        var lw = w.layers().get(rw.weightsLayer() < 0 ? layer : rw.weightsLayer());
        int H = cfg.hidden();
        float[] u = new float[T * H];
        if (rw.has(Rewire.Wire.PRE_FEEDFORWARD_NORM_SKIPPED)) System.arraycopy(residual, 0, u, 0, u.length);
        else rowsNorm(residual, T, H, lw.preFeedforwardNorm(), u, p);
        float[] g = linear(lw.gate(), u, T, null, p);
        float[] up = linear(lw.up(), u, T, null, p);
        if (rw.has(Rewire.Wire.MLP_GATE_UP_SWAPPED)) {
            float[] t = g;
            g = up;
            up = t;
        }
        // a variant's activation is rounded where the precision rounds the real one (its output, then the product)
        var f = p.activations();
        if (rw.has(Rewire.Wire.MLP_GELU_ERF)) for (int i = 0; i < g.length; i++) g[i] = f.round(f.round((float) dev.decodiff.engine.ExactGelu.gelu(g[i])) * up[i]);
        else if (rw.has(Rewire.Wire.MLP_SILU)) for (int i = 0; i < g.length; i++) g[i] = f.round(f.round((float) (g[i] / (1 + Math.exp(-g[i])))) * up[i]);
        else if (rw.has(Rewire.Wire.MLP_RELU)) for (int i = 0; i < g.length; i++) g[i] = f.round(Math.max(0f, g[i]) * up[i]);
        else if (rw.has(Rewire.Wire.MLP_NO_ACTIVATION)) for (int i = 0; i < g.length; i++) g[i] = f.round(g[i] * up[i]);
        else geluTimes(g, up, 0, g.length, p);
        return linear(lw.down(), g, T, null, p);
    }

    /**
     * moe.out on the post-attention residual: router (norm, scale, softmax, top-k renormalised, per-expert
     * scale), experts on pre_feedforward_layernorm_2(residual), summed in expert order.
     */
    public float[] moe(int layer, float[] residual, int T, Precision p) { return moe(layer, residual, T, p, Rewire.NONE); }

    /** moe.out under a rewiring of what the router and the experts read, the routing weights and the scales. */
    public float[] moe(int layer, float[] residual, int T, Precision p, Rewire rw) {
        var lwl = w.layers().get(rw.weightsLayer() < 0 ? layer : rw.weightsLayer());
        var m = lwl.moe();
        int H = cfg.hidden(), E = cfg.numExperts(), K = cfg.topKExperts(), Im = cfg.moeIntermediate();
        var f = p.activations();
        float[] u = new float[T * H];
        if (rw.has(Rewire.Wire.EXPERTS_UNNORMED)) System.arraycopy(residual, 0, u, 0, u.length);
        else rowsNorm(residual, T, H, rw.has(Rewire.Wire.EXPERTS_READ_DENSE_NORM) ? lwl.preFeedforwardNorm() : m.preFeedforwardNorm2(), u, p);
        float rootScale = rw.has(Rewire.Wire.ROUTER_ROOT_SCALE_MISSING) ? 1f : (float) StrictMath.pow(H, -0.5);
        float[] z = new float[T * H];
        for (int t = 0; t < T; t++) {
            if (rw.has(Rewire.Wire.ROUTER_UNNORMED)) System.arraycopy(residual, t * H, z, t * H, H);
            else if (rw.has(Rewire.Wire.ROUTER_READS_EXPERT_INPUT)) System.arraycopy(u, t * H, z, t * H, H);
            else norm(residual, t * H, H, null, z, t * H, p);
            for (int j = 0; j < H; j++) {
                float rs = rw.has(Rewire.Wire.ROUTER_SCALE_MISSING) ? 1f : m.routerScale()[j];
                z[t * H + j] = f.round(f.round(z[t * H + j] * rs) * rootScale);
            }
        }
        // GGUF converters keep the router's matrix in F32 whatever the type, so a half-precision matmul input is not its
        float[] logits = linear(m.router(), z, T, null, p.withMatmulInput(Format.F32).withQ8Input(false));
        float[] out = new float[T * H];
        float[] act = new float[Im], y = new float[H];
        for (int t = 0; t < T; t++) {
            int o = t * E;
            VectorMath.softmax(logits, o, E);
            int[] top = rw.has(Rewire.Wire.TOP_K_TIES_LAST) ? topKTiesLast(logits, o, E, K) : MoeRouting.topK(logits, o, E, K);
            top = MoeRouting.visit(t, logits, o, E, top);
            float sum = 0;
            for (int e : top) sum += logits[o + e];
            if (rw.has(Rewire.Wire.ROUTING_NOT_RENORMALISED)) sum = 1f;
            float[] weight = new float[E];
            boolean[] chosen = new boolean[E];
            for (int rank = 0; rank < top.length; rank++) {
                int e = top[rank];
                float scale = rw.has(Rewire.Wire.EXPERT_SCALE_MISSING) ? 1f
                        : rw.has(Rewire.Wire.EXPERT_SCALE_TWICE) ? m.perExpertScale()[e] * m.perExpertScale()[e]
                        : m.perExpertScale()[rw.has(Rewire.Wire.EXPERT_SCALE_BY_RANK) ? rank : e];
                weight[e] = f.round(logits[o + e] / sum * scale);
                chosen[e] = true;
            }
            float[] ut = java.util.Arrays.copyOfRange(u, t * H, (t + 1) * H);
            for (int e = 0; e < E; e++) {
                if (!chosen[e]) continue;
                var ep = p.withMatmulInput(p.experts());
                float[] gate = new float[Im], upv = new float[Im];
                product(m.gate()[e], matmulInput(m.gate()[e], ut, ep), 1, gate, p);
                minimumTerm(m.gate()[e], ut, 1, gate, ep);
                product(m.up()[e], matmulInput(m.up()[e], ut, ep), 1, upv, p);
                minimumTerm(m.up()[e], ut, 1, upv, ep);
                act(gate, p);
                act(upv, p);
                geluTimes(gate, upv, 0, Im, p);
                System.arraycopy(gate, 0, act, 0, Im);
                product(m.down()[e], matmulInput(m.down()[e], act, ep), 1, y, p);
                minimumTerm(m.down()[e], act, 1, y, ep);
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
        return layerOut(layer, residual, mlpOut, moeOut, ple, T, p, Rewire.NONE);
    }

    /** out under a rewiring of the post-feedforward norm, the per-layer input branch and layer_scalar. */
    public float[] layerOut(int layer, float[] residual, float[] mlpOut, float[] moeOut, float[] ple, int T, Precision p, Rewire rw) {
        var lw = w.layers().get(rw.weightsLayer() < 0 ? layer : rw.weightsLayer());
        int H = cfg.hidden();
        var f = p.activations();
        float s = lw.layerScalar();
        float[] m = mlpOut.clone();
        if (lw.moe() != null) {
            float[] e = moeOut.clone();
            rowsNorm(m, T, H, lw.moe().postFeedforwardNorm1(), m, p);
            rowsNorm(e, T, H, lw.moe().postFeedforwardNorm2(), e, p);
            for (int j = 0; j < m.length; j++) m[j] = f.round(m[j] + e[j]);
        }
        if (!rw.has(Rewire.Wire.POST_FEEDFORWARD_NORM_SKIPPED)) rowsNorm(m, T, H, lw.postFeedforwardNorm(), m, p);
        float[] x = new float[T * H];
        for (int j = 0; j < x.length; j++) x[j] = f.round(residual[j] + m[j]);
        boolean scalarFirst = rw.has(Rewire.Wire.LAYER_SCALAR_BEFORE_PLE);
        if (scalarFirst) for (int j = 0; j < x.length; j++) x[j] = f.round(x[j] * s);
        if (ple != null && !rw.has(Rewire.Wire.PLE_BRANCH_SKIPPED)) {
            int P = cfg.pleDim(), L = cfg.numLayers();
            float[] g = linear(lw.pleGate(), rw.has(Rewire.Wire.PLE_BRANCH_BEFORE_MLP) ? residual : x, T, null, p.withMatmulInput(p.pleGate()));
            float[] pl = new float[T * P];
            boolean layerMajor = rw.has(Rewire.Wire.PLE_SLICE_LAYER_MAJOR);
            for (int t = 0; t < T; t++) System.arraycopy(ple, (layerMajor ? layer * T + t : t * L + layer) * P, pl, t * P, P);
            geluTimes(g, pl, 0, g.length, p);
            float[] pr = linear(lw.pleProjection(), g, T, null, p);
            if (!rw.has(Rewire.Wire.PLE_POST_NORM_SKIPPED)) rowsNorm(pr, T, H, lw.plePostNorm(), pr, p);
            for (int j = 0; j < x.length; j++) x[j] = f.round(x[j] + pr[j]);
        }
        if (!scalarFirst) for (int j = 0; j < x.length; j++) x[j] = f.round(x[j] * s);
        if (rw.has(Rewire.Wire.LAYER_SCALAR_TWICE)) for (int j = 0; j < x.length; j++) x[j] = f.round(x[j] * s);
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
        float[] last = matmulInput(w.lmHead(), java.util.Arrays.copyOfRange(finalNorm, (T - 1) * H, T * H), p);
        float[] logits = new float[cfg.vocabSize()];
        if (p.scaleFormatDequant() && w.lmHead().packed()) product(w.lmHead(), last, 1, logits, p);
        else w.lmHead().matvec(last, 0, logits, 0);
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

    /** The input of matrix {@code m} (rows of its column count), converted where the precision says so. */
    private float[] matmulInput(WeightMatrix m, float[] x, Precision p) {
        float[] in = p.matmulInput() == Format.F32 ? x : p.matmulInput().round(x.clone());
        if (!p.q8Input()) return in;
        return switch (stored.of(m)) {
            case NONE -> in;
            case Q8_0, Q8_1 -> q8Activations(in, m.cols());
            case Q8_K -> q8KActivations(in, m.cols());
        };
    }

    /**
     * What ggml's Q4_1 / Q5_1 dot products with q8_1 inputs add beyond the dequantized product: a weight block
     * w = q·d + m meets an input block through d·d'·Σq·q' + m·s', where s' is the input block's sum stored in fp16
     * (s' = fp16(d'₃₂·Σq'), d'₃₂ = max|x|/127 before its own fp16 rounding) rather than the Σ d'·q' of the dequantized
     * input. So each output gains m·(s' − fp16(d'₃₂)·Σq') per block; m is the block's minimum weight (the quantizer
     * gives the minimum the code 0).
     */
    /** {@link #q8_1MinimumTerm} where the precision quantizes inputs and the matrix's vec-dot type is q8_1. */
    private void minimumTerm(WeightMatrix m, float[] x, int T, float[] y, Precision p) {
        if (p.q8Input() && stored.of(m) == StoredTypes.VecDot.Q8_1)
            q8_1MinimumTerm(m, p.matmulInput() == Format.F32 ? x : p.matmulInput().round(x.clone()), T, y);
    }

    private static void q8_1MinimumTerm(WeightMatrix m, float[] x, int T, float[] y) {
        q8_1MinimumTerm(m.rows(), m.cols(), (r, row) -> m.row(r, row, 0), x, T, y);
    }

    /** {@link #q8_1MinimumTerm} for a matrix given as row-major dequantized weights [rows, cols]. */
    public static void q8_1MinimumTerm(float[] weights, int rows, int cols, float[] x, int T, float[] y) {
        q8_1MinimumTerm(rows, cols, (r, row) -> System.arraycopy(weights, r * cols, row, 0, cols), x, T, y);
    }

    private interface RowReader { void read(int r, float[] row); }

    private static void q8_1MinimumTerm(int rows, int cols, RowReader rowOf, float[] x, int T, float[] y) {
        final int QK = dev.decodiff.engine.KvType.BLOCK;
        int nb = cols / QK;
        if (cols % QK != 0) return;
        float[] delta = new float[T * nb];
        for (int t = 0; t < T; t++)
            for (int b = 0; b < nb; b++) {
                int o = t * cols + b * QK;
                float amax = 0;
                for (int i = 0; i < QK; i++) amax = Math.max(amax, Math.abs(x[o + i]));
                float d = amax / 127f, id = amax != 0 ? 127f / amax : 0f;
                int sum = 0;
                for (int i = 0; i < QK; i++) sum += (int) Format.rint(x[o + i] * id);
                float s = Float.float16ToFloat(Float.floatToFloat16(d * sum));
                delta[t * nb + b] = s - Float.float16ToFloat(Float.floatToFloat16(d)) * sum;
            }
        float[] row = new float[cols];
        for (int r = 0; r < rows; r++) {
            rowOf.read(r, row);
            for (int b = 0; b < nb; b++) {
                float min = Float.POSITIVE_INFINITY;
                for (int i = 0; i < QK; i++) min = Math.min(min, row[b * QK + i]);
                for (int t = 0; t < T; t++) y[t * rows + r] += min * delta[t * nb + b];
            }
        }
    }

    /**
     * A matmul input as ggml-cpu quantizes it for K-quant weights (quantize_row_q8_K): per block of 256 along each
     * row, with max the value of largest |x| (its sign kept, the first of equals), iscale = −127/max,
     * q = min(127, round-half-even(iscale·x)), read back as q · (1/iscale) — an fp32 scale, not fp16.
     */
    public static float[] q8KActivations(float[] x, int cols) {
        final int QK = 256;
        if (cols % QK != 0 || x.length % cols != 0) return x; // no K-quant has such rows
        float[] out = new float[x.length];
        for (int b = 0; b < x.length; b += QK) {
            float amax = 0, max = 0;
            for (int i = 0; i < QK; i++) {
                float ax = Math.abs(x[b + i]);
                if (ax > amax) {
                    amax = ax;
                    max = x[b + i];
                }
            }
            if (amax == 0) continue;
            float iscale = -127f / max, d = 1 / iscale;
            for (int i = 0; i < QK; i++) out[b + i] = Math.min(127, (int) Format.rint(iscale * x[b + i])) * d; // an int8 code: no -0
        }
        return out;
    }

    /**
     * A matmul input as ggml-cpu quantizes it for quantized weights (quantize_row_q8_0, its vectorized form): per block
     * of 32 along each row, q = round-half-even(x · 127/max|x|), read back as q · fp16(max|x|/127).
     */
    public static float[] q8Activations(float[] x, int cols) {
        if (cols % dev.decodiff.engine.KvType.BLOCK != 0 || x.length % cols != 0) return x; // ggml would not quantize such rows either
        float[] out = new float[x.length];
        for (int b = 0; b < x.length; b += dev.decodiff.engine.KvType.BLOCK) {
            float amax = 0;
            for (int i = 0; i < dev.decodiff.engine.KvType.BLOCK; i++) amax = Math.max(amax, Math.abs(x[b + i]));
            float id = amax != 0 ? 127f / amax : 0f;
            float d = Float.float16ToFloat(Float.floatToFloat16(amax / 127f));
            for (int i = 0; i < dev.decodiff.engine.KvType.BLOCK; i++) out[b + i] = (int) Format.rint(x[b + i] * id) * d;
        }
        return out;
    }

    /** y = m·x for T rows, with the matrix's weights as the precision dequantizes them. */
    private static void product(WeightMatrix m, float[] x, int T, float[] y, Precision p) {
        if (!p.scaleFormatDequant() || !m.packed()) {
            m.matmul(x, T, y);
            return;
        }
        int R = m.rows(), C = m.cols();
        float[] row = new float[C];
        for (int r = 0; r < R; r++) {
            m.rowInScaleFormat(r, row, 0);
            for (int t = 0; t < T; t++) {
                float acc = 0;
                for (int c = 0; c < C; c++) acc = Math.fma(row[c], x[t * C + c], acc);
                y[t * R + r] = acc;
            }
        }
    }

    /** Row r of an embedding table, as the precision dequantizes it. */
    private static void tableRow(WeightMatrix m, int r, float[] out, int off, Precision p) {
        if (p.scaleFormatDequant()) m.rowInScaleFormat(r, out, off);
        else m.row(r, out, off);
    }

    /** Whether any matrix of the checkpoint is affine-quantized (MLX): only then can its dequantization differ. */
    public boolean hasAffineMatrices() {
        if (w.embed().packed() || w.lmHead().packed()) return true;
        for (var lw : w.layers()) if (lw.q().packed() || lw.o().packed()) return true;
        return false;
    }

    private float[] linear(WeightMatrix m, float[] x, int T, float[] bias, Precision p) {
        float[] y = new float[T * m.rows()];
        product(m, matmulInput(m, x, p), T, y, p);
        minimumTerm(m, x, T, y, p);
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
        if (f == Format.F32 && p.ropeFrequencies() == Format.F32) {
            rope.apply(x, off, heads, pos);
            return;
        }
        float[] inv = p.frequenciesAsHeld(rope.invFreq());
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

    /** topK with ties going to the higher index. */
    static int[] topKTiesLast(float[] p, int off, int n, int k) {
        int[] idx = new int[k];
        boolean[] used = new boolean[n];
        for (int j = 0; j < k; j++) {
            int best = -1;
            for (int e = 0; e < n; e++) if (!used[e] && (best < 0 || p[off + e] >= p[off + best])) best = e;
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
