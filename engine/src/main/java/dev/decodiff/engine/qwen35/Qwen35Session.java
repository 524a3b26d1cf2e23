package dev.decodiff.engine.qwen35;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.Probe;
import dev.decodiff.engine.arch.ModelSession;
import dev.decodiff.metal.WeightMatrix;

import java.util.Arrays;
import java.util.Set;

/**
 * One conversation over a {@link Qwen35Model}, in fp32, following transformers 5.17's Qwen3.5 decoder top to bottom.
 * It holds the caches a hybrid model needs: per Gated DeltaNet layer the last K−1 conv inputs and the dk × dv
 * recurrent state of every value head (fp32); per full-attention layer the keys (after k_norm and RoPE) and values.
 * As transformers does, a step of one token on a warm session takes the recurrent kernel and every other step
 * (prefill, a multi-token continuation, the first token) the chunked one. Probes see every capture point.
 */
public final class Qwen35Session implements ModelSession {
    private final Qwen35Model model;
    private final Qwen35Config cfg;
    private final Qwen35Weights w;
    private Probe probe;
    private int position;
    private int step;
    /** Per linear layer: the last K−1 conv inputs, time-major [K−1][C], oldest first (zeros before the first step). */
    private final float[][] convState;
    /** Per linear layer: the recurrent state [Hv][dk][dv]. */
    private final float[][] recState;
    /** Per full layer: keys and values of positions 0…position−1, [pos][nkv·d]. */
    private final float[][] keys;
    private final float[][] values;
    /** Catalog faults switched on (none by default); each is tested where its bug lives. */
    private final Set<Qwen35Fault> faults;
    /** Fault state-stale: per linear layer, the recurrent state as the previous decode step read it (the lagging buffer). */
    private final float[][] lagging;
    /** Whether the previous step was a one-token decode step (fault state-stale lags only behind those). */
    private boolean lastStepDecode;
    /** Fault partial-rope-whole-head: inv_freq over the whole head; the model's otherwise. */
    private final float[] invFreq;
    private final int rotaryDim;
    /** Nanoseconds spent inside the Gated DeltaNet layers between their projections (see {@link #linearMixerNanos}). */
    private long linearMixerNanos;

    Qwen35Session(Qwen35Model model, Probe probe, Set<Qwen35Fault> faults) {
        this.model = model;
        this.cfg = model.config();
        this.w = model.weights();
        this.probe = probe;
        this.faults = faults.isEmpty() ? Set.of() : Set.copyOf(faults);
        this.lagging = new float[cfg.numLayers()][];
        if (has(Qwen35Fault.PARTIAL_ROPE_WHOLE_HEAD)) {
            rotaryDim = cfg.headDim();
            invFreq = dev.decodiff.engine.Rope.inverseFrequencies(dev.decodiff.engine.RopeSpec.defaultRope(cfg.ropeTheta()), rotaryDim);
        } else {
            rotaryDim = cfg.rotaryDim();
            invFreq = model.invFreq();
        }
        int L = cfg.numLayers();
        convState = new float[L][];
        recState = new float[L][];
        keys = new float[L][];
        values = new float[L][];
        for (int i = 0; i < L; i++) {
            if (cfg.mixer(i) == Qwen35Config.Mixer.LINEAR) {
                convState[i] = new float[(cfg.convKernel() - 1) * cfg.convDim()];
                recState[i] = new float[cfg.linearValueHeads() * cfg.linearKeyDim() * cfg.linearValueDim()];
            } else {
                keys[i] = new float[0];
                values[i] = new float[0];
            }
        }
    }

    public Qwen35Model model() { return model; }

    private boolean has(Qwen35Fault f) { return faults.contains(f); }

    @Override public int position() { return position; }

    /**
     * Wall time this session spent in its Gated DeltaNet layers' own work, between their input projections and
     * out_proj: the causal conv, the q/k norms and gates, the delta rule's state update and read, and the gated norm;
     * summed over its steps. What a bench reads to tell the recurrent step's cost from the weights' streaming.
     */
    public long linearMixerNanos() { return linearMixerNanos; }

    @Override public void setProbe(Probe probe) { this.probe = probe; }

    /** Feeds tokens (a prefill, a continuation or one decode token) and returns the last position's logits. */
    @Override
    public float[] forward(int[] tokens) {
        int T = tokens.length, H = cfg.hidden();
        if (T == 0) throw new IllegalArgumentException("no tokens to feed");
        for (int t : tokens)
            if (t < 0 || t >= cfg.vocabSize()) throw new IllegalArgumentException("token id " + t + " is outside the vocabulary (0.." + (cfg.vocabSize() - 1) + ")");
        if ((long) position + T > cfg.maxPositions())
            throw new IllegalArgumentException("position " + (position + T) + " exceeds max_position_embeddings " + cfg.maxPositions());
        if (probe != null) probe.beginStep(step, position, T);
        float[] x = new float[T * H];
        for (int t = 0; t < T; t++) w.embed().row(tokens[t], x, t * H);
        capture(CapturePoints.EMBED, new int[]{T, H}, x);
        for (int i = 0; i < cfg.numLayers(); i++) {
            var lw = w.layers().get(i);
            float[] a = norm1p(x, T, H, lw.inputNorm());
            float[] mix = switch (lw.mixer()) {
                case Qwen35Weights.Linear lin -> linear(i, lin, a, T);
                case Qwen35Weights.Full full -> full(i, full, a, T);
            };
            for (int j = 0; j < x.length; j++) x[j] += mix[j];
            float[] b = norm1p(x, T, H, lw.postAttentionNorm());
            float[] f = switch (lw.ffn()) {
                case Qwen35Weights.Dense d -> mlp(d, b, T);
                case Qwen35Weights.Moe m -> moe(m, b, T);
            };
            capture(CapturePoints.layer(i, cfg.moe() ? CapturePoints.MOE_OUT : CapturePoints.MLP_OUT), new int[]{T, H}, f);
            for (int j = 0; j < x.length; j++) x[j] += f[j];
            capture(CapturePoints.layer(i, CapturePoints.OUT), new int[]{T, H}, x);
        }
        float[] h = norm1p(x, T, H, w.finalNorm());
        capture(CapturePoints.FINAL_NORM, new int[]{T, H}, h);
        float[] logits = new float[cfg.vocabSize()];
        w.lmHead().matvec(h, (T - 1) * H, logits, 0);
        capture(CapturePoints.LOGITS, new int[]{cfg.vocabSize()}, logits);
        lastStepDecode = position > 0 && T == 1;
        position += T;
        if (probe != null) probe.endStep(step, logits, argmax(logits));
        step++;
        return logits;
    }

    // ---------------------------------------------------------------------------------------------------------
    // Gated DeltaNet
    // ---------------------------------------------------------------------------------------------------------

    private float[] linear(int i, Qwen35Weights.Linear lw, float[] x, int T) {
        int C = cfg.convDim(), K = cfg.convKernel(), hk = cfg.linearKeyHeads(), hv = cfg.linearValueHeads();
        int dk = cfg.linearKeyDim(), dv = cfg.linearValueDim(), keyDim = cfg.keyDim(), r = hv / hk;
        float[][] proj = projections(x, T, lw.inProjQkv(), lw.inProjZ(), lw.inProjB(), lw.inProjA());
        float[] mixed = proj[0], z = proj[1], bRaw = proj[2], aRaw = proj[3];
        long t0 = System.nanoTime();

        // causal depthwise conv over [state (K−1 rows) | this step's inputs], SiLU; tap K−1 is the current token
        float[] state = convState[i];
        // a state is read only once one was written: on the first step the points are absent, not zeros
        boolean warm = position > 0;
        boolean decode = warm && T == 1;
        if (decode && has(Qwen35Fault.CONV_STATE_NOT_CARRIED)) Arrays.fill(state, 0f);
        if (warm) capture(CapturePoints.layer(i, CapturePoints.LINEAR_CONV_STATE_READ), new int[]{K - 1, C}, state);
        int rows = K - 1 + T;
        float[] window = new float[rows * C];
        System.arraycopy(state, 0, window, 0, (K - 1) * C);
        System.arraycopy(mixed, 0, window, (K - 1) * C, T * C);
        float[] conv = new float[T * C];
        float[] cw = lw.conv();
        boolean reversedTaps = has(Qwen35Fault.CONV_TAPS_REVERSED);
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++) {
                float s = 0f;
                for (int j = 0; j < K; j++) s += cw[c * K + (reversedTaps ? K - 1 - j : j)] * window[(t + j) * C + c];
                conv[t * C + c] = silu(s);
            }
        System.arraycopy(window, T * C, state, 0, (K - 1) * C);
        capture(CapturePoints.layer(i, CapturePoints.LINEAR_CONV_STATE), new int[]{K - 1, C}, state);

        // split, l2-norm q and k (over dk, eps 1e-6), repeat each key head over its r value heads (interleaved)
        float[] q = new float[T * hv * dk], k = new float[T * hv * dk], v = new float[T * hv * dv];
        var tmp = new float[dk];
        for (int t = 0; t < T; t++) {
            for (int kh = 0; kh < hk; kh++) {
                for (int part = 0; part < 2; part++) {
                    System.arraycopy(conv, t * C + part * keyDim + kh * dk, tmp, 0, dk);
                    if (!has(Qwen35Fault.QK_L2NORM_MISSING)) l2norm(tmp);
                    float[] dst = part == 0 ? q : k;
                    for (int rep = 0; rep < r; rep++) {
                        int vh = has(Qwen35Fault.LINEAR_HEADS_TILED) ? kh + rep * hk : kh * r + rep;
                        System.arraycopy(tmp, 0, dst, (t * hv + vh) * dk, dk);
                    }
                }
            }
            System.arraycopy(conv, t * C + 2 * keyDim, v, t * hv * dv, hv * dv);
        }
        float[] beta = new float[T * hv], g = new float[T * hv];
        for (int t = 0; t < T; t++)
            for (int h = 0; h < hv; h++) {
                beta[t * hv + h] = has(Qwen35Fault.BETA_NOT_SIGMOIDED) ? bRaw[t * hv + h] : sigmoid(bRaw[t * hv + h]);
                float negA = -(float) Math.exp(lw.aLog()[h]);
                if (has(Qwen35Fault.DECAY_SIGN_FLIPPED)) negA = -negA;
                g[t * hv + h] = negA * softplus(aRaw[t * hv + h] + lw.dtBias()[h]);
                if (has(Qwen35Fault.DECAY_EXP_TWICE)) g[t * hv + h] = (float) Math.exp(g[t * hv + h]);
            }
        capture(CapturePoints.layer(i, CapturePoints.LINEAR_Q), new int[]{T, hv, dk}, q);
        capture(CapturePoints.layer(i, CapturePoints.LINEAR_K), new int[]{T, hv, dk}, k);
        capture(CapturePoints.layer(i, CapturePoints.LINEAR_V), new int[]{T, hv, dv}, v);
        capture(CapturePoints.layer(i, CapturePoints.LINEAR_BETA), new int[]{T, hv}, beta);
        capture(CapturePoints.layer(i, CapturePoints.LINEAR_DECAY), new int[]{T, hv}, g);
        float[] S = recState[i];
        if (decode && has(Qwen35Fault.STATE_NOT_CARRIED)) Arrays.fill(S, 0f);
        if (decode && has(Qwen35Fault.STATE_STALE)) {
            // the buffer the previous decode step read is the one this step reads too
            float[] current = S.clone();
            if (lastStepDecode && lagging[i] != null) System.arraycopy(lagging[i], 0, S, 0, S.length);
            lagging[i] = current;
        }
        if (warm) capture(CapturePoints.layer(i, CapturePoints.LINEAR_STATE_READ), new int[]{hv, dk, dv}, S);

        // the kernel transformers would run for this call: the recurrent one on a decode token (every head in place,
        // in parallel), else the chunked one per value head (its rows gathered, the heads shared out over the threads)
        boolean recurrent = decode;
        boolean decayAfter = has(Qwen35Fault.DECODE_DECAY_AFTER_UPDATE);
        float[] core = new float[T * hv * dv];
        if (recurrent && !decayAfter) GatedDeltaRule.recurrentStep(q, k, v, beta, g, hv, dk, dv, S, core);
        else dev.decodiff.metal.Parallel.forRange(hv, 1, (h0, h1) -> {
            float[] qh = new float[T * dk], kh = new float[T * dk], vh = new float[T * dv], bh = new float[T], gh = new float[T];
            float[] oh = new float[T * dv], sh = new float[dk * dv];
            for (int h = h0; h < h1; h++) {
                for (int t = 0; t < T; t++) {
                    System.arraycopy(q, (t * hv + h) * dk, qh, t * dk, dk);
                    System.arraycopy(k, (t * hv + h) * dk, kh, t * dk, dk);
                    System.arraycopy(v, (t * hv + h) * dv, vh, t * dv, dv);
                    bh[t] = beta[t * hv + h];
                    gh[t] = g[t * hv + h];
                }
                System.arraycopy(S, h * dk * dv, sh, 0, dk * dv);
                if (recurrent) GatedDeltaRule.recurrent(qh, kh, vh, bh, gh, T, dk, dv, sh, oh, decayAfter);
                else GatedDeltaRule.chunked(qh, kh, vh, bh, gh, T, dk, dv, sh, oh);
                System.arraycopy(sh, 0, S, h * dk * dv, dk * dv);
                for (int t = 0; t < T; t++) System.arraycopy(oh, t * dv, core, (t * hv + h) * dv, dv);
            }
        });
        capture(CapturePoints.layer(i, CapturePoints.LINEAR_CORE_OUT), new int[]{T, hv, dv}, core);
        capture(CapturePoints.layer(i, CapturePoints.LINEAR_STATE), new int[]{hv, dk, dv}, S);

        // gated RMSNorm per (token, value head): normalise, times the plain weight, times silu(z)
        float[] normW = lw.norm();
        float[] y = new float[T * hv * dv];
        for (int row = 0; row < T * hv; row++) {
            int o = row * dv;
            float inv = rsqrt(meanSquare(core, o, dv) + cfg.rmsNormEps());
            boolean gate = !has(Qwen35Fault.GATED_NORM_NO_GATE), onePlus = has(Qwen35Fault.GATED_NORM_ONE_PLUS);
            for (int j = 0; j < dv; j++)
                y[o + j] = (onePlus ? 1f + normW[j] : normW[j]) * (core[o + j] * inv) * (gate ? silu(z[o + j]) : 1f);
        }
        linearMixerNanos += System.nanoTime() - t0;
        float[] out = matmul(lw.outProj(), y, T);
        capture(CapturePoints.layer(i, CapturePoints.LINEAR_OUT), new int[]{T, cfg.hidden()}, out);
        return out;
    }

    // ---------------------------------------------------------------------------------------------------------
    // Gated full attention
    // ---------------------------------------------------------------------------------------------------------

    private float[] full(int i, Qwen35Weights.Full aw, float[] x, int T) {
        int nh = cfg.numHeads(), nkv = cfg.numKvHeads(), d = cfg.headDim(), R = rotaryDim, half = R / 2;
        float[][] proj = projections(x, T, aw.q(), aw.k(), aw.v());
        float[] qg = proj[0], kx = proj[1], vx = proj[2];
        float[] q = new float[T * nh * d], gate = new float[T * nh * d];
        float[] inv = invFreq;
        float[] cos = new float[half], sin = new float[half];
        for (int t = 0; t < T; t++) {
            // fp32 angle: float(p)·inv_freq[i], as transformers' fp32 matmul of positions by inv_freq forms it
            float p = position + t;
            for (int j = 0; j < half; j++) {
                float ang = p * inv[j];
                cos[j] = (float) Math.cos(ang);
                sin[j] = (float) Math.sin(ang);
            }
            for (int h = 0; h < nh; h++) {
                int src = (t * nh + h) * 2 * d, dst = (t * nh + h) * d;
                System.arraycopy(qg, src, q, dst, d);
                for (int j = 0; j < d; j++) gate[dst + j] = sigmoid(qg[src + d + j]);
                norm1pInPlace(q, dst, d, aw.qNorm());
                rope(q, dst, R, cos, sin);
            }
            for (int h = 0; h < nkv; h++) {
                int o = (t * nkv + h) * d;
                norm1pInPlace(kx, o, d, aw.kNorm());
                rope(kx, o, R, cos, sin);
            }
        }
        capture(CapturePoints.layer(i, CapturePoints.Q), new int[]{T, nh, d}, q);
        capture(CapturePoints.layer(i, CapturePoints.ATTN_GATE), new int[]{T, nh * d}, gate);
        capture(CapturePoints.layer(i, CapturePoints.K), new int[]{T, nkv, d}, kx);
        capture(CapturePoints.layer(i, CapturePoints.V), new int[]{T, nkv, d}, vx);
        int stride = nkv * d, total = position + T;
        // grown by doubling, not to the exact length: a copy of the whole cache at every decode step is a read and a
        // write of all of it per token (8 MB a layer at 2,048 positions of this shape)
        if (keys[i].length < total * stride) {
            int cap = Math.max(total * stride, Math.min(2 * keys[i].length, Integer.MAX_VALUE - 16));
            keys[i] = Arrays.copyOf(keys[i], cap);
            values[i] = Arrays.copyOf(values[i], cap);
        }
        System.arraycopy(kx, 0, keys[i], position * stride, T * stride);
        System.arraycopy(vx, 0, values[i], position * stride, T * stride);
        float[] K = keys[i], V = values[i];
        capture(CapturePoints.layer(i, CapturePoints.K_READ), new int[]{total, nkv, d}, K);
        capture(CapturePoints.layer(i, CapturePoints.V_READ), new int[]{total, nkv, d}, V);

        float[] att = new float[T * nh * d];
        // every (token, KV head) on its own: the heads of a group share each key and value read
        int from = position;
        dev.decodiff.metal.Parallel.forRange(T * nkv, 1, (p0, p1) -> {
            float[][] scores = new float[nh / nkv][total];
            for (int p = p0; p < p1; p++) Qwen35Attention.group(q, K, V, p / nkv, p % nkv, from + p / nkv + 1, nh, nkv, d, stride, scores, att);
        });
        if (!has(Qwen35Fault.ATTN_OUTPUT_GATE_MISSING)) for (int j = 0; j < att.length; j++) att[j] *= gate[j];
        capture(CapturePoints.layer(i, CapturePoints.ATTN_OUT), new int[]{T, nh * d}, att);
        return matmul(aw.o(), att, T);
    }

    /** Rotate-half RoPE on the first R dims of one head; the rest pass through. */
    private static void rope(float[] x, int o, int R, float[] cos, float[] sin) {
        int half = R / 2;
        for (int j = 0; j < half; j++) {
            float a = x[o + j], b = x[o + j + half];
            x[o + j] = a * cos[j] - b * sin[j];
            x[o + j + half] = b * cos[j] + a * sin[j];
        }
    }

    // ---------------------------------------------------------------------------------------------------------
    // Feed-forward
    // ---------------------------------------------------------------------------------------------------------

    private float[] mlp(Qwen35Weights.Dense d, float[] x, int T) {
        float[] g = new float[T * d.gate().rows()], u = new float[T * d.up().rows()];
        if (T == 1 && WeightMatrix.canShareMatvec(d.gate(), d.up()) && d.gate().rows() == d.up().rows()) {
            // gate and up read the same activations: one parallel call, the gated activation on each piece as it is done
            WeightMatrix.matvecPaired(d.gate(), d.up(), x, g, u, (from, to) -> {
                for (int j = from; j < to; j++) g[j] = silu(g[j]) * u[j];
            });
        } else {
            d.gate().matmul(x, T, g);
            d.up().matmul(x, T, u);
            for (int j = 0; j < g.length; j++) g[j] = silu(g[j]) * u[j];
        }
        return matmul(d.down(), g, T);
    }

    /**
     * x times each matrix (all with x's columns). A decode token's matvecs share one parallel call where the kernels
     * allow it ({@link WeightMatrix#matvecAll}: the bits of separate calls, one fork and join instead of one each).
     */
    private static float[][] projections(float[] x, int T, WeightMatrix... ms) {
        var ys = new float[ms.length][];
        for (int j = 0; j < ms.length; j++) ys[j] = new float[T * ms[j].rows()];
        boolean shared = T == 1;
        for (var m : ms) shared &= WeightMatrix.canShareMatvec(ms[0], m);
        if (shared) WeightMatrix.matvecAll(ms, x, ys);
        else for (int j = 0; j < ms.length; j++) ms[j].matmul(x, T, ys[j]);
        return ys;
    }

    /**
     * Sparse MoE: softmax router (fp32), top-k renormalised, experts summed in ascending expert order (as
     * transformers' index_add_ loop over experts does), plus the shared expert times sigmoid of its scalar gate.
     */
    private float[] moe(Qwen35Weights.Moe m, float[] x, int T) {
        int H = cfg.hidden(), E = cfg.numExperts(), topK = cfg.topK(), I = cfg.moeIntermediate();
        float[] logits = matmul(m.router(), x, T);
        float[] out = new float[T * H];
        float[] gate = new float[I], up = new float[I], y = new float[H];
        float[] shared = mlp(m.shared(), x, T);
        for (int t = 0; t < T; t++) {
            float[] p = Arrays.copyOfRange(logits, t * E, (t + 1) * E);
            softmax(p);
            int[] idx = new int[topK];
            float[] wt = new float[topK];
            boolean[] taken = new boolean[E];
            for (int s = 0; s < topK; s++) {
                int best = -1;
                for (int e = 0; e < E; e++) if (!taken[e] && (best < 0 || p[e] > p[best])) best = e;
                taken[best] = true;
                idx[s] = best;
                wt[s] = p[best];
            }
            float sum = 0f;
            for (int s = 0; s < topK; s++) sum += wt[s];
            for (int s = 0; s < topK; s++) wt[s] /= sum;
            for (int e = 0; e < E; e++) {
                if (!taken[e]) continue;
                float we = 0f;
                for (int s = 0; s < topK; s++) if (idx[s] == e) we = wt[s];
                m.gate()[e].matvec(x, t * H, gate, 0);
                m.up()[e].matvec(x, t * H, up, 0);
                for (int j = 0; j < I; j++) gate[j] = silu(gate[j]) * up[j];
                m.down()[e].matvec(gate, 0, y, 0);
                for (int j = 0; j < H; j++) out[t * H + j] += y[j] * we;
            }
            float sg = 0f;
            for (int j = 0; j < H; j++) sg += m.sharedGate()[j] * x[t * H + j];
            sg = has(Qwen35Fault.MOE_SHARED_GATE_MISSING) ? 1f : sigmoid(sg);
            for (int j = 0; j < H; j++) out[t * H + j] += sg * shared[t * H + j];
        }
        return out;
    }

    // ---------------------------------------------------------------------------------------------------------
    // State
    // ---------------------------------------------------------------------------------------------------------

    /** A deep copy of every cache and the position. */
    @Override
    public Snapshot snapshot() {
        return new Snapshot(model, position, deepCopy(convState), deepCopy(recState), deepCopy(keys), deepCopy(values));
    }

    @Override
    public void restore(ModelSession.State state) {
        if (!(state instanceof Snapshot s) || s.model != model)
            throw new IllegalArgumentException("not a snapshot of a session over " + model.directory());
        position = s.position;
        lastStepDecode = false;
        Arrays.fill(lagging, null);
        if (has(Qwen35Fault.PREFIX_REUSE_WITHOUT_STATE)) s = s.withoutLinearState();
        copyInto(s.conv, convState);
        copyInto(s.rec, recState);
        copyInto(s.keys, keys);
        copyInto(s.values, values);
    }

    /**
     * A session's state at a position: conv states, recurrent states and KV caches. Restoring only part of it (the
     * KV caches without the linear-attention states) is the hybrid-model prefix-cache bug; see {@link #withoutLinearState}.
     */
    public record Snapshot(Qwen35Model model, int position, float[][] conv, float[][] rec, float[][] keys, float[][] values)
            implements ModelSession.State {
        /** The same KV caches with the conv and recurrent states zeroed: what a cache that checkpoints only attention holds. */
        public Snapshot withoutLinearState() {
            float[][] c = deepCopy(conv), r = deepCopy(rec);
            for (var a : c) if (a != null) Arrays.fill(a, 0f);
            for (var a : r) if (a != null) Arrays.fill(a, 0f);
            return new Snapshot(model, position, c, r, keys, values);
        }

        @Override public Snapshot withoutRecurrentState() { return withoutLinearState(); }

        @Override
        public Snapshot withRecurrentStateOf(ModelSession.State other) {
            if (!(other instanceof Snapshot o) || o.model != model)
                throw new IllegalArgumentException("not a snapshot of a session over " + model.directory());
            return new Snapshot(model, position, deepCopy(o.conv), deepCopy(o.rec), keys, values);
        }
    }

    private static float[][] deepCopy(float[][] a) {
        var out = new float[a.length][];
        for (int i = 0; i < a.length; i++) out[i] = a[i] == null ? null : a[i].clone();
        return out;
    }

    private static void copyInto(float[][] src, float[][] dst) {
        for (int i = 0; i < src.length; i++) dst[i] = src[i] == null ? null : src[i].clone();
    }

    // ---------------------------------------------------------------------------------------------------------
    // Kernels (fp32; each as transformers computes it)
    // ---------------------------------------------------------------------------------------------------------

    private void capture(String name, int[] shape, float[] buf) {
        if (probe == null || !probe.wants(name)) return;
        int n = 1;
        for (int s : shape) n *= s;
        float[] rep = probe.capture(name, shape, Arrays.copyOf(buf, n));
        if (rep != null) {
            if (rep.length != n) throw new IllegalArgumentException("probe replaced " + name + " with " + rep.length + " values, expected " + n);
            System.arraycopy(rep, 0, buf, 0, n);
        }
    }

    private static float[] matmul(WeightMatrix m, float[] x, int T) {
        float[] y = new float[T * m.rows()];
        m.matmul(x, T, y);
        return y;
    }

    /** Zero-centred RMSNorm: x·rsqrt(mean(x²)+eps)·(1+w), in fp32. */
    private float[] norm1p(float[] x, int T, int n, float[] w) {
        float[] y = x.clone();
        for (int t = 0; t < T; t++) norm1pInPlace(y, t * n, n, w);
        return y;
    }

    private void norm1pInPlace(float[] x, int o, int n, float[] w) {
        float inv = rsqrt(meanSquare(x, o, n) + cfg.rmsNormEps());
        for (int j = 0; j < n; j++) x[o + j] = (x[o + j] * inv) * (1f + w[j]);
    }

    /** The GDN q/k L2 norm: x·rsqrt(Σx² + 1e-6) (a sum, with transformers' hard-coded eps). */
    private static void l2norm(float[] x) {
        double s = 0;
        for (float v : x) s += (double) v * v;
        float inv = rsqrt((float) s + 1e-6f);
        for (int j = 0; j < x.length; j++) x[j] *= inv;
    }

    private static float meanSquare(float[] x, int o, int n) {
        double s = 0;
        for (int j = 0; j < n; j++) s += (double) x[o + j] * x[o + j];
        return (float) (s / n);
    }

    private static float rsqrt(float v) { return (float) (1.0 / Math.sqrt(v)); }

    static float sigmoid(float x) { return 1f / (1f + (float) Math.exp(-x)); }

    static float silu(float x) { return x / (1f + (float) Math.exp(-x)); }

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

    private static int argmax(float[] v) {
        int best = 0;
        for (int j = 1; j < v.length; j++) if (v[j] > v[best]) best = j;
        return best;
    }
}
