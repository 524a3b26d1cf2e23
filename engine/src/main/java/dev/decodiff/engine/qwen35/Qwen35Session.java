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
        float[] mixed = matmul(lw.inProjQkv(), x, T);
        float[] z = matmul(lw.inProjZ(), x, T);
        float[] bRaw = matmul(lw.inProjB(), x, T);
        float[] aRaw = matmul(lw.inProjA(), x, T);

        // causal depthwise conv over [state (K−1 rows) | this step's inputs], SiLU; tap K−1 is the current token
        float[] state = convState[i];
        // a state is read only once one was written: on the first step the points are absent, not zeros
        boolean warm = position > 0;
        boolean decode = warm && T == 1;
        if (decode && has(Qwen35Fault.CONV_STATE_NOT_CARRIED)) Arrays.fill(state, 0f);
        if (warm && T > 1 && has(Qwen35Fault.CONV_STATE_DROPPED_ON_CONTINUATION)) Arrays.fill(state, 0f);
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
                    if (has(Qwen35Fault.QK_L2NORM_MEAN)) rmsUnitNorm(tmp);
                    else if (!has(Qwen35Fault.QK_L2NORM_MISSING)) l2norm(tmp);
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

        // per value head: gather its rows, run the kernel transformers would run for this call, scatter back
        boolean recurrent = decode;
        boolean decayAfter = has(Qwen35Fault.DECODE_DECAY_AFTER_UPDATE), betaMissing = has(Qwen35Fault.BETA_MISSING);
        float[] core = new float[T * hv * dv];
        float[] qh = new float[T * dk], kh = new float[T * dk], vh = new float[T * dv], bh = new float[T], gh = new float[T];
        float[] oh = new float[T * dv], sh = new float[dk * dv];
        for (int h = 0; h < hv; h++) {
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
        capture(CapturePoints.layer(i, CapturePoints.LINEAR_CORE_OUT), new int[]{T, hv, dv}, core);
        // fault state-bf16: the cache keeps the state in bf16, so what is written (and read next step) is rounded
        if (has(Qwen35Fault.STATE_BF16)) dev.decodiff.engine.ops.Format.BF16.round(S);
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
        float[] out = matmul(lw.outProj(), y, T);
        capture(CapturePoints.layer(i, CapturePoints.LINEAR_OUT), new int[]{T, cfg.hidden()}, out);
        return out;
    }

    // ---------------------------------------------------------------------------------------------------------
    // Gated full attention
    // ---------------------------------------------------------------------------------------------------------

    private float[] full(int i, Qwen35Weights.Full aw, float[] x, int T) {
        int nh = cfg.numHeads(), nkv = cfg.numKvHeads(), d = cfg.headDim(), R = rotaryDim, half = R / 2;
        float[] qg = matmul(aw.q(), x, T);
        float[] kx = matmul(aw.k(), x, T);
        float[] vx = matmul(aw.v(), x, T);
        float[] q = new float[T * nh * d], gate = new float[T * nh * d];
        boolean halves = has(Qwen35Fault.QUERY_GATE_SPLIT_HALVES);
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
                // per head: query then gate; the fault query-gate-split-halves takes the whole row's two halves
                int src = (t * nh + h) * 2 * d, dst = (t * nh + h) * d;
                int qSrc = halves ? t * nh * 2 * d + h * d : src, gSrc = halves ? t * nh * 2 * d + nh * d + h * d : src + d;
                System.arraycopy(qg, qSrc, q, dst, d);
                for (int j = 0; j < d; j++) gate[dst + j] = sigmoid(qg[gSrc + j]);
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
        keys[i] = Arrays.copyOf(keys[i], total * stride);
        values[i] = Arrays.copyOf(values[i], total * stride);
        System.arraycopy(kx, 0, keys[i], position * stride, T * stride);
        System.arraycopy(vx, 0, values[i], position * stride, T * stride);
        float[] K = keys[i], V = values[i];
        capture(CapturePoints.layer(i, CapturePoints.K_READ), new int[]{total, nkv, d}, K);
        capture(CapturePoints.layer(i, CapturePoints.V_READ), new int[]{total, nkv, d}, V);

        float scale = (float) Math.pow(d, -0.5);
        int group = nh / nkv;
        float[] att = new float[T * nh * d];
        float[] scores = new float[total];
        for (int t = 0; t < T; t++) {
            int n = position + t + 1;
            for (int h = 0; h < nh; h++) {
                int qo = (t * nh + h) * d, kvh = h / group;
                float max = Float.NEGATIVE_INFINITY;
                for (int j = 0; j < n; j++) {
                    float s = 0f;
                    int ko = j * stride + kvh * d;
                    for (int e = 0; e < d; e++) s += q[qo + e] * K[ko + e];
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
                    int vo = j * stride + kvh * d;
                    for (int e = 0; e < d; e++) att[qo + e] += pj * V[vo + e];
                }
            }
        }
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
        float[] g = matmul(d.gate(), x, T), u = matmul(d.up(), x, T);
        for (int j = 0; j < g.length; j++) g[j] = silu(g[j]) * u[j];
        return matmul(d.down(), g, T);
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
        float one = has(Qwen35Fault.NORM_ONE_PLUS_TWICE) ? 2f : 1f;
        for (int j = 0; j < n; j++) x[o + j] = (x[o + j] * inv) * (one + w[j]);
    }

    /** The GDN q/k L2 norm: x·rsqrt(Σx² + 1e-6) (a sum, with transformers' hard-coded eps). */
    private static void l2norm(float[] x) {
        double s = 0;
        for (float v : x) s += (double) v * v;
        float inv = rsqrt((float) s + 1e-6f);
        for (int j = 0; j < x.length; j++) x[j] *= inv;
    }

    /** Fault qk-l2norm-mean: x·rsqrt(mean(x²) + 1e-6), an RMSNorm without weight, where the l2 norm sums. */
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
