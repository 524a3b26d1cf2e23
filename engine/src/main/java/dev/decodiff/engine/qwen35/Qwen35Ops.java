package dev.decodiff.engine.qwen35;

import dev.decodiff.engine.ops.Format;
import dev.decodiff.engine.ops.MoeRouting;
import dev.decodiff.engine.ops.Precision;
import dev.decodiff.engine.ops.StoredMatrices;
import dev.decodiff.metal.Parallel;
import dev.decodiff.metal.Transcendentals;
import dev.decodiff.metal.WeightMatrix;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

import java.util.Arrays;
import java.util.Set;

/**
 * Qwen3.5's ops, the one description of its math: {@link Qwen35Session}'s forward calls these (with
 * {@link Precision#EXACT} and its switched-on faults), and attribution calls them to recompute a capture point from a
 * side's own recorded inputs, exactly or under a precision hypothesis. Each op rounds where that kind of engine
 * rounds: {@code activations} (a framework running the model in bf16/fp16: after every linear, norm, product and add;
 * the Gated DeltaNet kernel, β·… and the log decay in fp32, its state fp32 throughout, as transformers keeps it);
 * {@code matmulInput} (ggml converting a matmul's input for half-precision weights); {@code storedMatrices} (ggml on a
 * GGUF's own matrices: each as stored and its input converted to the type's vec-dot type, {@link #withStored}).
 */
public final class Qwen35Ops {
    private final Qwen35Model model;
    private final Qwen35Config cfg;
    private final Qwen35Weights w;
    /** How a GGUF stores each matrix (null: nothing known, every matrix as the checkpoint's). */
    private final StoredMatrices stored;

    public Qwen35Ops(Qwen35Model model) { this(model, null); }

    private Qwen35Ops(Qwen35Model model, StoredMatrices stored) {
        this.model = model;
        this.cfg = model.config();
        this.w = model.weights();
        this.stored = stored;
    }

    /** These ops knowing how a GGUF stores each matrix (by the matrix; absent: F32, untouched). */
    public Qwen35Ops withStored(StoredMatrices stored) { return new Qwen35Ops(model, stored); }

    /** How the GGUF stores the matrices (null when these ops do not know it). */
    public StoredMatrices stored() { return stored; }

    public Qwen35Config config() { return cfg; }

    public Qwen35Model model() { return model; }

    // ---- embedding and the end -------------------------------------------------------------------------------

    public float[] embed(int[] tokens, Precision p) {
        int T = tokens.length, H = cfg.hidden();
        float[] x = new float[T * H];
        for (int t = 0; t < T; t++) w.embed().row(tokens[t], x, t * H);
        return act(x, p);
    }

    /** The zero-centred input_layernorm of a layer's input residual. */
    public float[] inputNorm(int layer, float[] x, int T, Precision p) { return inputNorm(layer, x, T, p, Set.of()); }

    public float[] inputNorm(int layer, float[] x, int T, Precision p, Set<Qwen35Fault> faults) {
        return norm1p(x, T, cfg.hidden(), w.layers().get(layer).inputNorm(), p, faults);
    }

    public float[] finalNorm(float[] x, int T, Precision p) { return finalNorm(x, T, p, Set.of()); }

    public float[] finalNorm(float[] x, int T, Precision p, Set<Qwen35Fault> faults) { return norm1p(x, T, cfg.hidden(), w.finalNorm(), p, faults); }

    /** logits [V] of the last row. */
    public float[] logits(float[] finalNorm, int T, Precision p) {
        int H = cfg.hidden();
        return linear(w.lmHead(), Arrays.copyOfRange(finalNorm, (T - 1) * H, T * H), 1, p);
    }

    // ---- Gated DeltaNet --------------------------------------------------------------------------------------

    /** in_proj_qkv (the raw conv input), in_proj_z, in_proj_b and in_proj_a of the normed input. */
    public record Projections(float[] mixed, float[] z, float[] b, float[] a) {}

    public Projections projections(int layer, float[] normed, int T, Precision p) {
        var lw = linearWeights(layer);
        var y = linearAll(normed, T, p, lw.inProjQkv(), lw.inProjZ(), lw.inProjB(), lw.inProjA());
        return new Projections(y[0], y[1], y[2], y[3]);
    }

    /** What the causal conv makes: the conv state it leaves (K−1 rows of C, oldest first) and q, k, v per value head. */
    public record Conv(float[] state, float[] q, float[] k, float[] v) {}

    /**
     * The causal depthwise conv over [state read | this step's inputs] with SiLU (tap K−1 multiplies the current
     * token), the state it leaves (the last K−1 inputs), then the split, q/k's l2 norm (over dk, eps 1e-6, in fp32 as
     * the kernel computes it) and each key head repeated over its r value heads (interleaved). {@code stateRead} null:
     * zeros (the first step).
     */
    public Conv conv(int layer, float[] stateRead, float[] mixed, int T, Precision p, Set<Qwen35Fault> faults) {
        int C = cfg.convDim(), K = cfg.convKernel(), hk = cfg.linearKeyHeads(), hv = cfg.linearValueHeads();
        int dk = cfg.linearKeyDim(), dv = cfg.linearValueDim(), keyDim = cfg.keyDim(), r = hv / hk;
        var f = p.activations();
        float[] window = new float[(K - 1 + T) * C];
        if (stateRead != null) System.arraycopy(stateRead, 0, window, 0, (K - 1) * C);
        System.arraycopy(mixed, 0, window, (K - 1) * C, T * C);
        float[] conv = new float[T * C];
        float[] cw = linearWeights(layer).conv();
        boolean reversedTaps = faults.contains(Qwen35Fault.CONV_TAPS_REVERSED);
        if (!reversedTaps && f == Format.F32) {
            // the same sums in tap order, a vector of channels at a time, rows shared out over the threads
            float[] byTap = linearWeights(layer).convByTap();
            Parallel.forRange(T, 8, (t0, t1) -> {
                for (int t = t0; t < t1; t++) convRow(byTap, window, t, C, K, conv);
            });
        } else
            for (int t = 0; t < T; t++)
                for (int c = 0; c < C; c++) {
                    float s = 0f;
                    for (int j = 0; j < K; j++) s += cw[c * K + (reversedTaps ? K - 1 - j : j)] * window[(t + j) * C + c];
                    conv[t * C + c] = f.round(silu(f.round(s)));
                }
        float[] state = Arrays.copyOfRange(window, T * C, (T + K - 1) * C);
        float[] q = new float[T * hv * dk], k = new float[T * hv * dk], v = new float[T * hv * dv];
        var tmp = new float[dk];
        boolean tiled = faults.contains(Qwen35Fault.LINEAR_HEADS_TILED), noNorm = faults.contains(Qwen35Fault.QK_L2NORM_MISSING),
                meanNorm = faults.contains(Qwen35Fault.QK_L2NORM_MEAN);
        for (int t = 0; t < T; t++) {
            for (int kh = 0; kh < hk; kh++)
                for (int part = 0; part < 2; part++) {
                    System.arraycopy(conv, t * C + part * keyDim + kh * dk, tmp, 0, dk);
                    if (meanNorm) rmsUnitNorm(tmp);
                    else if (!noNorm) l2norm(tmp);
                    float[] dst = part == 0 ? q : k;
                    for (int rep = 0; rep < r; rep++) {
                        int vh = tiled ? kh + rep * hk : kh * r + rep;
                        System.arraycopy(tmp, 0, dst, (t * hv + vh) * dk, dk);
                    }
                }
            System.arraycopy(conv, t * C + 2 * keyDim, v, t * hv * dv, hv * dv);
        }
        return new Conv(state, q, k, v);
    }

    /** β = sigmoid(b) (in the model's dtype); g = −exp(A_log)·softplus(a + dt_bias), the log decay, in fp32. */
    public float[] beta(int layer, float[] b, int T, Precision p, Set<Qwen35Fault> faults) {
        var f = p.activations();
        float[] beta = new float[b.length];
        boolean raw = faults.contains(Qwen35Fault.BETA_NOT_SIGMOIDED);
        for (int j = 0; j < b.length; j++) beta[j] = raw ? b[j] : f.round(sigmoid(b[j]));
        return beta;
    }

    public float[] decay(int layer, float[] a, int T, Precision p, Set<Qwen35Fault> faults) {
        var lw = linearWeights(layer);
        int hv = cfg.linearValueHeads();
        float[] g = new float[T * hv];
        for (int t = 0; t < T; t++)
            for (int h = 0; h < hv; h++) {
                float negA = -(float) Math.exp(lw.aLog()[h]);
                if (faults.contains(Qwen35Fault.DECAY_SIGN_FLIPPED)) negA = -negA;
                g[t * hv + h] = negA * softplus(a[t * hv + h] + lw.dtBias()[h]);
                if (faults.contains(Qwen35Fault.DECAY_EXP_TWICE)) g[t * hv + h] = (float) Math.exp(g[t * hv + h]);
            }
        return g;
    }

    /** The delta rule's output per value head [T, Hv, dv] (in the model's dtype) and the state it leaves [Hv, dk, dv] (fp32). */
    public record Core(float[] out, float[] state) {}

    /**
     * The gated delta rule of every value head from the state read (null: zeros), in fp32 whatever the precision (the
     * kernel casts its inputs to fp32; its state stays fp32); {@code recurrent}: transformers' one-token kernel, else
     * its chunked one. The output is cast back to the model's dtype.
     */
    public Core deltaRule(float[] stateRead, float[] q, float[] k, float[] v, float[] beta, float[] g, int T, boolean recurrent, Precision p,
                          Set<Qwen35Fault> faults) {
        int hv = cfg.linearValueHeads(), dk = cfg.linearKeyDim(), dv = cfg.linearValueDim();
        float[] S = stateRead == null ? new float[hv * dk * dv] : stateRead.clone();
        boolean decayAfter = faults.contains(Qwen35Fault.DECODE_DECAY_AFTER_UPDATE), betaMissing = faults.contains(Qwen35Fault.BETA_MISSING);
        float[] core = new float[T * hv * dv];
        // value heads are independent: shared out over the threads, each with its own gathered rows
        dev.decodiff.metal.Parallel.forRange(hv, 1, (h0, h1) -> {
            float[] qh = new float[T * dk], kh = new float[T * dk], vh = new float[T * dv], bh = new float[T], gh = new float[T];
            float[] oh = new float[T * dv], sh = new float[dk * dv];
            for (int h = h0; h < h1; h++) {
                for (int t = 0; t < T; t++) {
                    System.arraycopy(q, (t * hv + h) * dk, qh, t * dk, dk);
                    System.arraycopy(k, (t * hv + h) * dk, kh, t * dk, dk);
                    System.arraycopy(v, (t * hv + h) * dv, vh, t * dv, dv);
                    bh[t] = betaMissing ? 1f : beta[t * hv + h];
                    gh[t] = g[t * hv + h];
                }
                System.arraycopy(S, h * dk * dv, sh, 0, dk * dv);
                if (recurrent) GatedDeltaRule.recurrent(qh, kh, vh, bh, gh, T, dk, dv, sh, oh, decayAfter);
                else GatedDeltaRule.chunked(qh, kh, vh, bh, gh, T, dk, dv, sh, oh);
                System.arraycopy(sh, 0, S, h * dk * dv, dk * dv);
                for (int t = 0; t < T; t++) System.arraycopy(oh, t * dv, core, (t * hv + h) * dv, dv);
            }
        });
        if (faults.contains(Qwen35Fault.STATE_KEPT_IN_BF16)) Format.BF16.round(S);
        return new Core(act(core, p), S);
    }

    /** Whether {@link #deltaRuleStep} gives a decode token what {@link #deltaRule} gives it under these faults (none of them touches the step). */
    public boolean stepsInPlace(Set<Qwen35Fault> faults) {
        return !faults.contains(Qwen35Fault.DECODE_DECAY_AFTER_UPDATE) && !faults.contains(Qwen35Fault.BETA_MISSING)
                && !faults.contains(Qwen35Fault.STATE_KEPT_IN_BF16);
    }

    /**
     * {@link #deltaRule} of one decode token, exact, with the state S [Hv, dk, dv] updated in place (a session's own
     * state: no copy of it in or out, 1 MB a layer at dk = dv = 128): every value head at once, the heads shared out
     * over the threads, the bits of the one-head recurrent form ({@link GatedDeltaRule#recurrentStep}). Returns the output.
     */
    public float[] deltaRuleStep(float[] S, float[] q, float[] k, float[] v, float[] beta, float[] g) {
        int hv = cfg.linearValueHeads(), dk = cfg.linearKeyDim(), dv = cfg.linearValueDim();
        float[] core = new float[hv * dv];
        GatedDeltaRule.recurrentStep(q, k, v, beta, g, hv, dk, dv, S, core);
        return core;
    }

    /**
     * A decode token's {@link #conv}, {@link #beta}, {@link #decay}, {@link #deltaRuleStep} and {@link #gatedOut}'s norm
     * with no fault switched on, in fp32, fused per key head ({@link LinearDecodeStep}): the same bits. The conv state
     * [(K−1)·C] and the recurrent state [Hv·dk·dv] are updated in place. Returns out_proj's input
     * ({@link #linearOutput} takes it).
     */
    public float[] linearStep(int layer, float[] convState, float[] S, Projections pr) {
        return LinearDecodeStep.run(cfg, linearWeights(layer), convState, S, pr.mixed(), pr.z(), pr.b(), pr.a());
    }

    /** out_proj of the gated norm's output: linear.out. */
    public float[] linearOutput(int layer, float[] gated, int T, Precision p) { return linear(linearWeights(layer).outProj(), gated, T, p); }

    /** The recurrent state as a store of {@code f} keeps it between steps (the bug class "recurrent state kept in bf16"). */
    public static float[] storedState(float[] state, Format f) { return f.round(state.clone()); }

    /** Gated RMSNorm per (token, value head) — normalise, times the plain weight, times silu(z) — then out_proj: linear.out. */
    public float[] gatedOut(int layer, float[] core, float[] z, int T, Precision p, Set<Qwen35Fault> faults) {
        var lw = linearWeights(layer);
        var f = p.activations();
        int hv = cfg.linearValueHeads(), dv = cfg.linearValueDim();
        float[] normW = lw.norm();
        float[] y = new float[T * hv * dv];
        boolean gate = !faults.contains(Qwen35Fault.GATED_NORM_NO_GATE), onePlus = faults.contains(Qwen35Fault.GATED_NORM_ONE_PLUS);
        for (int row = 0; row < T * hv; row++) {
            int o = row * dv;
            float inv = rsqrt(meanSquare(core, o, dv) + cfg.rmsNormEps());
            for (int j = 0; j < dv; j++) {
                float n = f.round(core[o + j] * inv);
                float wn = f == Format.F32 ? n : f.round((onePlus ? 1f + normW[j] : normW[j]) * n);
                y[o + j] = f == Format.F32 ? (onePlus ? 1f + normW[j] : normW[j]) * n * (gate ? silu(z[o + j]) : 1f)
                        : f.round(wn * (gate ? silu(z[o + j]) : 1f));
            }
        }
        return linear(lw.outProj(), y, T, p);
    }

    // ---- gated full attention --------------------------------------------------------------------------------

    /** q (after q_norm and RoPE), sigmoid(gate) [T, H·hd], k (after k_norm and RoPE), v of one layer's rows. */
    public record Qkv(float[] q, float[] gate, float[] k, float[] v) {}

    public Qkv qkv(int layer, float[] normed, int T, int start, Precision p, Set<Qwen35Fault> faults) {
        var aw = fullWeights(layer);
        var f = p.activations();
        int nh = cfg.numHeads(), nkv = cfg.numKvHeads(), d = cfg.headDim();
        boolean whole = faults.contains(Qwen35Fault.PARTIAL_ROPE_WHOLE_HEAD), halves = faults.contains(Qwen35Fault.QUERY_GATE_SPLIT_HALVES);
        int R = whole ? d : cfg.rotaryDim(), half = R / 2;
        float[] inv = p.frequenciesAsHeld(whole ? dev.decodiff.engine.Rope.inverseFrequencies(dev.decodiff.engine.RopeSpec.defaultRope(cfg.ropeTheta()), d) : model.invFreq());
        var qkv = linearAll(normed, T, p, aw.q(), aw.k(), aw.v());
        float[] qg = qkv[0], kx = qkv[1], vx = qkv[2];
        float[] q = new float[T * nh * d], gate = new float[T * nh * d];
        float[] cos = new float[half], sin = new float[half];
        for (int t = 0; t < T; t++) {
            // fp32 angle: float(p)·inv_freq[i], as transformers' fp32 matmul of positions by inv_freq forms it
            float pos = start + t;
            for (int j = 0; j < half; j++) {
                float ang = pos * inv[j];
                cos[j] = f.round((float) Math.cos(ang));
                sin[j] = f.round((float) Math.sin(ang));
            }
            for (int h = 0; h < nh; h++) {
                // per head: query then gate; the fault query-gate-split-halves takes the whole row's two halves
                int src = (t * nh + h) * 2 * d, dst = (t * nh + h) * d;
                int qSrc = halves ? t * nh * 2 * d + h * d : src, gSrc = halves ? t * nh * 2 * d + nh * d + h * d : src + d;
                System.arraycopy(qg, qSrc, q, dst, d);
                for (int j = 0; j < d; j++) gate[dst + j] = f.round(sigmoid(qg[gSrc + j]));
                norm1pInPlace(q, dst, d, aw.qNorm(), p, faults);
                rope(q, dst, R, cos, sin, f);
            }
            for (int h = 0; h < nkv; h++) {
                int o = (t * nkv + h) * d;
                norm1pInPlace(kx, o, d, aw.kNorm(), p, faults);
                rope(kx, o, R, cos, sin, f);
            }
        }
        return new Qkv(q, gate, kx, vx);
    }

    /**
     * attn.out [T, H·hd] (before o_proj): causal softmax(q·kᵀ/√hd)·v per head over keys/values of positions
     * 0…start+T−1 ([pos][Hkv·hd]), query head h reading KV head h/(H/Hkv), times sigmoid(gate).
     */
    public float[] attention(float[] q, float[] gate, float[] keys, float[] values, int T, int start, Precision p, Set<Qwen35Fault> faults) {
        int nh = cfg.numHeads(), nkv = cfg.numKvHeads(), d = cfg.headDim(), stride = nkv * d;
        var f = p.activations();
        float scale = (float) Math.pow(d, -0.5);
        int group = nh / nkv;
        float[] att = new float[T * nh * d];
        if (f == Format.F32) {
            // fp32 probabilities and outputs, vectorized with the plain loop's bits (Qwen35Attention)
            Qwen35Attention.prefill(q, keys, values, T, start, nh, nkv, d, att);
            if (!faults.contains(Qwen35Fault.ATTN_OUTPUT_GATE_MISSING)) for (int j = 0; j < att.length; j++) att[j] = f.round(att[j] * gate[j]);
            return att;
        }
        float[] scores = new float[start + T];
        for (int t = 0; t < T; t++) {
            int n = start + t + 1;
            for (int h = 0; h < nh; h++) {
                int qo = (t * nh + h) * d, kvh = h / group;
                float max = Float.NEGATIVE_INFINITY;
                for (int j = 0; j < n; j++) {
                    float s = 0f;
                    int ko = j * stride + kvh * d;
                    for (int e = 0; e < d; e++) s += q[qo + e] * keys[ko + e];
                    scores[j] = s * scale;
                    max = Math.max(max, scores[j]);
                }
                float sum = 0f;
                for (int j = 0; j < n; j++) {
                    scores[j] = (float) Math.exp(scores[j] - max);
                    sum += scores[j];
                }
                for (int j = 0; j < n; j++) {
                    // a half-precision framework rounds the probabilities before P·V
                    float pj = f.round(scores[j] / sum);
                    int vo = j * stride + kvh * d;
                    for (int e = 0; e < d; e++) att[qo + e] += pj * values[vo + e];
                }
                if (f != Format.F32) f.round(att, qo, d);
            }
        }
        if (!faults.contains(Qwen35Fault.ATTN_OUTPUT_GATE_MISSING)) for (int j = 0; j < att.length; j++) att[j] = f.round(att[j] * gate[j]);
        return att;
    }

    /**
     * {@link #attention} of one decode token at position {@code start} in fp32 (what it gives with {@link Precision#EXACT},
     * bit for bit) with the keys 0…start read from {@code keys}, a block copy of the cache caught up to start + 1
     * ({@link KeyBlocks}); values [pos][Hkv·hd] as there. The KV heads are shared out over the threads.
     */
    float[] attentionStep(float[] q, float[] gate, KeyBlocks keys, float[] values, int start, Set<Qwen35Fault> faults) {
        int nh = cfg.numHeads(), nkv = cfg.numKvHeads(), d = cfg.headDim(), n = start + 1, group = nh / nkv;
        if (keys.count() < n) throw new IllegalStateException("the key blocks hold " + keys.count() + " positions, the step reads " + n);
        int padded = (n + KeyBlocks.WIDTH - 1) / KeyBlocks.WIDTH * KeyBlocks.WIDTH;
        boolean gated = !faults.contains(Qwen35Fault.ATTN_OUTPUT_GATE_MISSING);
        float[] att = new float[nh * d];
        Parallel.forRange(nkv, 1, (k0, k1) -> {
            float[][] sc = new float[group][padded];
            for (int kvh = k0; kvh < k1; kvh++) Qwen35Attention.decodeGroup(q, gate, keys, values, kvh, n, nh, nkv, d, sc, att, gated);
        });
        return att;
    }

    /** o_proj of the gated attention output: the full-attention mixer's output. */
    public float[] attentionOutput(int layer, float[] attnOut, int T, Precision p) { return linear(fullWeights(layer).o(), attnOut, T, p); }

    // ---- residual and feed-forward ----------------------------------------------------------------------------

    /** a + b, rounded as the model's dtype adds. */
    public static float[] add(float[] a, float[] b, Precision p) {
        var f = p.activations();
        float[] out = new float[a.length];
        for (int j = 0; j < a.length; j++) out[j] = f.round(a[j] + b[j]);
        return out;
    }

    /** The post-attention norm of the residual after the mixer. */
    public float[] postAttentionNorm(int layer, float[] residual, int T, Precision p) { return postAttentionNorm(layer, residual, T, p, Set.of()); }

    public float[] postAttentionNorm(int layer, float[] residual, int T, Precision p, Set<Qwen35Fault> faults) {
        return norm1p(residual, T, cfg.hidden(), w.layers().get(layer).postAttentionNorm(), p, faults);
    }

    /** The layer's feed-forward block (dense MLP or MoE) on the post-attention-normed rows. */
    public float[] ffn(int layer, float[] normed, int T, Precision p, Set<Qwen35Fault> faults) {
        return switch (w.layers().get(layer).ffn()) {
            case Qwen35Weights.Dense d -> mlp(d, normed, T, p);
            case Qwen35Weights.Moe m -> moe(m, normed, T, p, faults);
        };
    }

    private float[] mlp(Qwen35Weights.Dense d, float[] x, int T, Precision p) {
        var f = p.activations();
        if (T == 1 && plain(p, d.gate(), d.up()) && d.gate().rows() == d.up().rows()) {
            // gate and up read the same activations: one parallel call, the gated activation on each piece as it is done
            float[] g = new float[d.gate().rows()], u = new float[d.up().rows()];
            WeightMatrix.matvecPaired(d.gate(), d.up(), x, g, u, (from, to) -> Transcendentals.siluTimes(g, u, from, to));
            return linear(d.down(), g, T, p);
        }
        float[] g = linear(d.gate(), x, T, p), u = linear(d.up(), x, T, p);
        for (int j = 0; j < g.length; j++) g[j] = f.round(f.round(silu(g[j])) * u[j]);
        return linear(d.down(), g, T, p);
    }

    /**
     * Sparse MoE: softmax router (fp32), top-k renormalised, experts summed in ascending expert order (as
     * transformers' index_add_ loop over experts does), plus the shared expert times sigmoid of its scalar gate.
     */
    private float[] moe(Qwen35Weights.Moe m, float[] x, int T, Precision p, Set<Qwen35Fault> faults) {
        int H = cfg.hidden(), E = cfg.numExperts(), topK = cfg.topK();
        var f = p.activations();
        float[] logits = linear(m.router(), x, T, p);
        float[] out = new float[T * H];
        float[] shared = mlp(m.shared(), x, T, p);
        float[] xt = new float[H];
        for (int t = 0; t < T; t++) {
            float[] pr = Arrays.copyOfRange(logits, t * E, (t + 1) * E);
            softmax(pr);
            int[] idx = MoeRouting.routedTopK(pr, 0, E, topK, t);
            boolean[] taken = new boolean[E];
            float[] wt = new float[topK];
            float sum = 0f;
            for (int s = 0; s < topK; s++) {
                taken[idx[s]] = true;
                wt[s] = pr[idx[s]];
                sum += wt[s];
            }
            for (int s = 0; s < topK; s++) wt[s] = f.round(wt[s] / sum);
            System.arraycopy(x, t * H, xt, 0, H);
            for (int e = 0; e < E; e++) {
                if (!taken[e]) continue;
                float we = 0f;
                for (int s = 0; s < topK; s++) if (idx[s] == e) we = wt[s];
                float[] gate = linear(m.gate()[e], xt, 1, p), up = linear(m.up()[e], xt, 1, p);
                for (int j = 0; j < gate.length; j++) gate[j] = f.round(f.round(silu(gate[j])) * up[j]);
                float[] y = linear(m.down()[e], gate, 1, p);
                for (int j = 0; j < H; j++) out[t * H + j] = f.round(out[t * H + j] + f.round(y[j] * we));
            }
            float sg = 0f;
            float[] sgw = m.sharedGate();
            float[] sgIn = sharedGateInput(xt, p);
            for (int j = 0; j < H; j++) sg += sgw[j] * sgIn[j];
            sg = faults.contains(Qwen35Fault.MOE_SHARED_GATE_MISSING) ? 1f : f.round(sigmoid(f.round(sg)));
            for (int j = 0; j < H; j++) out[t * H + j] = f.round(out[t * H + j] + f.round(sg * shared[t * H + j]));
        }
        return out;
    }

    /** The shared-expert gate's input: its [1, H] matrix is kept F32 by GGUF converters, so only a uniform conversion rounds it. */
    private static float[] sharedGateInput(float[] x, Precision p) {
        return p.matmulInput() == Format.F32 ? x : p.matmulInput().round(x.clone());
    }

    // ---- the sub-ops, where each kind of engine rounds ------------------------------------------------------

    private static float[] act(float[] a, Precision p) {
        p.activations().round(a, 0, a.length);
        return a;
    }

    /**
     * Whether these matrices run as the engine's own kernels on fp32 inputs and outputs (no stored GGUF matrices, no
     * rounding) and can share a decode matvec call.
     */
    private boolean plain(Precision p, WeightMatrix... ms) {
        if (p.matmulInput() != Format.F32 || p.activations() != Format.F32) return false;
        for (var m : ms) {
            if (p.storedMatrices() && stored != null && stored.get(m) != null) return false;
            if (!WeightMatrix.canShareMatvec(ms[0], m)) return false;
        }
        return true;
    }

    /**
     * {@link #linear} of x by each matrix (all with x's columns). A decode token's plain matvecs share one parallel call
     * ({@link WeightMatrix#matvecAll}: the bits of separate calls, one fork and join instead of one each).
     */
    private float[][] linearAll(float[] x, int T, Precision p, WeightMatrix... ms) {
        var ys = new float[ms.length][];
        if (T == 1 && plain(p, ms)) {
            for (int j = 0; j < ms.length; j++) ys[j] = new float[ms[j].rows()];
            WeightMatrix.matvecAll(ms, x, ys);
        } else for (int j = 0; j < ms.length; j++) ys[j] = linear(ms[j], x, T, p);
        return ys;
    }

    /**
     * y = m·x for T rows: the engine's kernel on the checkpoint's weights; under storedMatrices the matrix as the GGUF
     * stores it with its input converted to the type's vec-dot type; under matmulInput every input rounded; the
     * output rounded to the activations' format.
     */
    private float[] linear(WeightMatrix m, float[] x, int T, Precision p) {
        var s = p.storedMatrices() && stored != null ? stored.get(m) : null;
        if (s != null) return act(s.matmul(x, T, m.rows(), m.cols()), p);
        float[] y = new float[T * m.rows()];
        m.matmul(p.matmulInput() == Format.F32 ? x : p.matmulInput().round(x.clone()), T, y);
        return act(y, p);
    }

    /** Zero-centred RMSNorm: x·rsqrt(mean(x²)+eps)·(1+w), in fp32, cast once at the end. */
    private float[] norm1p(float[] x, int T, int n, float[] w, Precision p, Set<Qwen35Fault> faults) {
        float[] y = x.clone();
        for (int t = 0; t < T; t++) norm1pInPlace(y, t * n, n, w, p, faults);
        return y;
    }

    private void norm1pInPlace(float[] x, int o, int n, float[] w, Precision p, Set<Qwen35Fault> faults) {
        float inv = rsqrt(meanSquare(x, o, n) + cfg.rmsNormEps());
        // the fault norm-one-plus-twice: the +1 a converter already folded into the weight is added again
        float one = faults.contains(Qwen35Fault.NORM_ONE_PLUS_TWICE) ? 2f : 1f;
        for (int j = 0; j < n; j++) x[o + j] = (x[o + j] * inv) * (one + w[j]);
        p.activations().round(x, o, n);
    }

    /** Rotate-half RoPE on the first R dims of one head; the rest pass through. A half-precision framework rounds each product. */
    private static void rope(float[] x, int o, int R, float[] cos, float[] sin, Format f) {
        int half = R / 2;
        for (int j = 0; j < half; j++) {
            float a = x[o + j], b = x[o + j + half];
            if (f == Format.F32) {
                x[o + j] = a * cos[j] - b * sin[j];
                x[o + j + half] = b * cos[j] + a * sin[j];
            } else {
                x[o + j] = f.round(f.round(a * cos[j]) - f.round(b * sin[j]));
                x[o + j + half] = f.round(f.round(b * cos[j]) + f.round(a * sin[j]));
            }
        }
    }

    /** The GDN q/k L2 norm: x·rsqrt(Σx² + 1e-6) (a sum, with transformers' hard-coded eps). */
    private static void l2norm(float[] x) {
        double s = 0;
        for (float v : x) s += (double) v * v;
        float inv = rsqrt((float) s + 1e-6f);
        for (int j = 0; j < x.length; j++) x[j] *= inv;
    }

    /** The fault qk-l2norm-mean: x·rsqrt(mean(x²) + 1e-6), an RMSNorm without weight, where the l2 norm sums. */
    private static void rmsUnitNorm(float[] x) {
        float inv = rsqrt(meanSquare(x, 0, x.length) + 1e-6f);
        for (int j = 0; j < x.length; j++) x[j] *= inv;
    }

    private static float meanSquare(float[] x, int o, int n) {
        double s = 0;
        for (int j = 0; j < n; j++) s += (double) x[o + j] * x[o + j];
        return (float) (s / n);
    }

    private static float rsqrt(float v) { return (float) (1.0 / Math.sqrt(v)); }

    static float sigmoid(float x) { return 1f / (1f + (float) Math.exp(-x)); }

    static float silu(float x) { return dev.decodiff.metal.VectorMath.silu(x); }

    private static final VectorSpecies<Float> F = FloatVector.SPECIES_PREFERRED;

    /**
     * Row t of the causal conv in fp32: out[t·C + c] = SiLU(Σ_j byTap[j·C + c]·window[(t + j)·C + c]), the taps summed
     * in order from 0 with each product rounded before it is added (the scalar loop's bits), a vector of channels at a
     * time; SiLU over the row as {@link Transcendentals#silu} computes it, the scalar form's bits too.
     */
    static void convRow(float[] byTap, float[] window, int t, int C, int K, float[] out) {
        int L = F.length(), c = 0;
        for (int bound = C - C % L; c < bound; c += L) {
            var s = FloatVector.zero(F);
            for (int j = 0; j < K; j++) s = s.add(FloatVector.fromArray(F, byTap, j * C + c).mul(FloatVector.fromArray(F, window, (t + j) * C + c)));
            s.intoArray(out, t * C + c);
        }
        for (; c < C; c++) {
            float s = 0f;
            for (int j = 0; j < K; j++) s += byTap[j * C + c] * window[(t + j) * C + c];
            out[t * C + c] = s;
        }
        Transcendentals.silu(out, t * C, C, out, t * C);
    }

    /** torch's softplus (β = 1, threshold 20). */
    static float softplus(float x) { return x > 20f ? x : (float) Math.log1p(Math.exp(x)); }

    private static void softmax(float[] p) {
        float max = Float.NEGATIVE_INFINITY;
        for (float v : p) max = Math.max(max, v);
        float sum = 0f;
        for (int j = 0; j < p.length; j++) {
            p[j] = (float) Math.exp(p[j] - max);
            sum += p[j];
        }
        for (int j = 0; j < p.length; j++) p[j] /= sum;
    }

    private Qwen35Weights.Linear linearWeights(int layer) { return (Qwen35Weights.Linear) w.layers().get(layer).mixer(); }

    private Qwen35Weights.Full fullWeights(int layer) { return (Qwen35Weights.Full) w.layers().get(layer).mixer(); }
}
