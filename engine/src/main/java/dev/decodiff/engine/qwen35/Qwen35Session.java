package dev.decodiff.engine.qwen35;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.Probe;
import dev.decodiff.engine.arch.ModelSession;
import dev.decodiff.engine.ops.Precision;

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
    /** The one description of the model's ops, which attribution recomputes too. */
    private final Qwen35Ops ops;
    private static final Precision EXACT = Precision.EXACT;
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
    /** Per full layer: decode's block copy of keys (see {@link KeyBlocks}), caught up at each decode step. */
    private final KeyBlocks[] keyBlocks;
    /** Catalog faults switched on (none by default); each is tested where its bug lives. */
    private final Set<Qwen35Fault> faults;
    /** Fault state-stale: per linear layer, the recurrent state as the previous decode step read it (the lagging buffer). */
    private final float[][] lagging;
    /** Whether the previous step was a one-token decode step (fault state-stale lags only behind those). */
    private boolean lastStepDecode;
    Qwen35Session(Qwen35Model model, Probe probe, Set<Qwen35Fault> faults) {
        this.model = model;
        this.cfg = model.config();
        this.ops = model.ops();
        this.probe = probe;
        this.faults = faults.isEmpty() ? Set.of() : Set.copyOf(faults);
        this.lagging = new float[cfg.numLayers()][];
        int L = cfg.numLayers();
        convState = new float[L][];
        recState = new float[L][];
        keys = new float[L][];
        values = new float[L][];
        keyBlocks = new KeyBlocks[L];
        for (int i = 0; i < L; i++) {
            if (cfg.mixer(i) == Qwen35Config.Mixer.LINEAR) {
                convState[i] = new float[(cfg.convKernel() - 1) * cfg.convDim()];
                recState[i] = new float[cfg.linearValueHeads() * cfg.linearKeyDim() * cfg.linearValueDim()];
            } else {
                keys[i] = new float[0];
                values[i] = new float[0];
                keyBlocks[i] = new KeyBlocks(cfg.numKvHeads(), cfg.headDim());
            }
        }
    }

    public Qwen35Model model() { return model; }

    private boolean has(Qwen35Fault f) { return faults.contains(f); }

    @Override public int position() { return position; }

    /**
     * Wall time this session spent in its Gated DeltaNet layers' own work between their input projections and the
     * gated norm: the causal conv, the q/k norms and gates, the delta rule's state update and read (on a decode token
     * with nothing captured inside the layer, {@link Qwen35Ops#linearStep}, the gated norm too); summed over its
     * steps. What a bench reads to tell the recurrent step's cost from the weights' streaming.
     */
    public long linearMixerNanos() { return linearMixerNanos; }

    /** Nanoseconds spent inside the Gated DeltaNet layers between their projections (see {@link #linearMixerNanos}). */
    private long linearMixerNanos;

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
        float[] x = ops.embed(tokens, EXACT);
        capture(CapturePoints.EMBED, new int[]{T, H}, x);
        for (int i = 0; i < cfg.numLayers(); i++) {
            float[] a = ops.inputNorm(i, x, T, EXACT, faults);
            float[] mix = cfg.mixer(i) == Qwen35Config.Mixer.LINEAR ? linear(i, a, T) : full(i, a, T);
            x = Qwen35Ops.add(x, mix, EXACT);
            float[] f = ops.ffn(i, ops.postAttentionNorm(i, x, T, EXACT, faults), T, EXACT, faults);
            capture(CapturePoints.layer(i, cfg.moe() ? CapturePoints.MOE_OUT : CapturePoints.MLP_OUT), new int[]{T, H}, f);
            x = Qwen35Ops.add(x, f, EXACT);
            capture(CapturePoints.layer(i, CapturePoints.OUT), new int[]{T, H}, x);
        }
        float[] h = ops.finalNorm(x, T, EXACT, faults);
        capture(CapturePoints.FINAL_NORM, new int[]{T, H}, h);
        float[] logits = ops.logits(h, T, EXACT);
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

    private float[] linear(int i, float[] x, int T) {
        int C = cfg.convDim(), K = cfg.convKernel(), hv = cfg.linearValueHeads(), dk = cfg.linearKeyDim(), dv = cfg.linearValueDim();
        var pr = ops.projections(i, x, T, EXACT);
        long t0 = System.nanoTime();
        // a state is read only once one was written: on the first step the points are absent, not zeros
        boolean warm = position > 0;
        boolean decode = warm && T == 1;
        if (decode && faults.isEmpty() && !capturesInsideLinear(i)) {
            float[] gated = ops.linearStep(i, convState[i], recState[i], pr);
            linearMixerNanos += System.nanoTime() - t0;
            float[] out = ops.linearOutput(i, gated, T, EXACT);
            capture(CapturePoints.layer(i, CapturePoints.LINEAR_OUT), new int[]{T, cfg.hidden()}, out);
            return out;
        }
        float[] state = convState[i];
        if (decode && has(Qwen35Fault.CONV_STATE_NOT_CARRIED)) Arrays.fill(state, 0f);
        if (warm && T > 1 && has(Qwen35Fault.CONV_STATE_DROPPED_ON_CONTINUATION)) Arrays.fill(state, 0f);
        if (warm) capture(CapturePoints.layer(i, CapturePoints.LINEAR_CONV_STATE_READ), new int[]{K - 1, C}, state);
        var conv = ops.conv(i, state, pr.mixed(), T, EXACT, faults);
        System.arraycopy(conv.state(), 0, state, 0, state.length);
        capture(CapturePoints.layer(i, CapturePoints.LINEAR_CONV_STATE), new int[]{K - 1, C}, state);
        float[] beta = ops.beta(i, pr.b(), T, EXACT, faults), g = ops.decay(i, pr.a(), T, EXACT, faults);
        float[] q = conv.q(), k = conv.k(), v = conv.v();
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
        // the kernel transformers would run for this call: the recurrent one for a one-token decode, else the chunked one
        float[] coreOut;
        if (decode && ops.stepsInPlace(faults)) coreOut = ops.deltaRuleStep(S, q, k, v, beta, g); // no copy of the state in or out
        else {
            var core = ops.deltaRule(S, q, k, v, beta, g, T, decode, EXACT, faults);
            System.arraycopy(core.state(), 0, S, 0, S.length);
            coreOut = core.out();
        }
        linearMixerNanos += System.nanoTime() - t0;
        capture(CapturePoints.layer(i, CapturePoints.LINEAR_CORE_OUT), new int[]{T, hv, dv}, coreOut);
        capture(CapturePoints.layer(i, CapturePoints.LINEAR_STATE), new int[]{hv, dk, dv}, S);
        float[] out = ops.gatedOut(i, coreOut, pr.z(), T, EXACT, faults);
        capture(CapturePoints.layer(i, CapturePoints.LINEAR_OUT), new int[]{T, cfg.hidden()}, out);
        return out;
    }

    /** The points a Gated DeltaNet layer offers between its projections and out_proj. */
    private static final java.util.List<String> INSIDE_LINEAR = java.util.List.of(CapturePoints.LINEAR_CONV_STATE_READ, CapturePoints.LINEAR_CONV_STATE,
            CapturePoints.LINEAR_Q, CapturePoints.LINEAR_K, CapturePoints.LINEAR_V, CapturePoints.LINEAR_BETA, CapturePoints.LINEAR_DECAY,
            CapturePoints.LINEAR_STATE_READ, CapturePoints.LINEAR_CORE_OUT, CapturePoints.LINEAR_STATE);

    /**
     * Whether the probe wants a point inside layer i's Gated DeltaNet (then the layer runs op by op, each point offered
     * where it is computed, instead of {@link Qwen35Ops#linearStep}, which computes them without stopping).
     */
    private boolean capturesInsideLinear(int i) {
        if (probe == null) return false;
        for (var p : INSIDE_LINEAR) if (probe.wants(CapturePoints.layer(i, p))) return true;
        return false;
    }

    // ---------------------------------------------------------------------------------------------------------
    // Gated full attention
    // ---------------------------------------------------------------------------------------------------------

    private float[] full(int i, float[] x, int T) {
        int nh = cfg.numHeads(), nkv = cfg.numKvHeads(), d = cfg.headDim();
        var qkv = ops.qkv(i, x, T, position, EXACT, faults);
        float[] q = qkv.q(), kx = qkv.k(), vx = qkv.v(), gate = qkv.gate();
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
        // a probe may replace the keys read: the block copy is then rebuilt from the cache's rows
        if (capture(CapturePoints.layer(i, CapturePoints.K_READ), new int[]{total, nkv, d}, keys[i])) keyBlocks[i].clear();
        capture(CapturePoints.layer(i, CapturePoints.V_READ), new int[]{total, nkv, d}, values[i]);
        float[] att;
        if (T == 1) {
            keyBlocks[i].catchUp(keys[i], total);
            att = ops.attentionStep(q, gate, keyBlocks[i], values[i], position, faults);
        } else att = ops.attention(q, gate, keys[i], values[i], T, position, EXACT, faults);
        capture(CapturePoints.layer(i, CapturePoints.ATTN_OUT), new int[]{T, nh * d}, att);
        return ops.attentionOutput(i, att, T, EXACT);
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
        for (var b : keyBlocks) if (b != null) b.clear();
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

    /** Offers buf to the probe; true where the probe replaced it. */
    private boolean capture(String name, int[] shape, float[] buf) {
        if (probe == null || !probe.wants(name)) return false;
        int n = 1;
        for (int s : shape) n *= s;
        float[] rep = probe.capture(name, shape, Arrays.copyOf(buf, n));
        if (rep == null) return false;
        if (rep.length != n) throw new IllegalArgumentException("probe replaced " + name + " with " + rep.length + " values, expected " + n);
        System.arraycopy(rep, 0, buf, 0, n);
        return true;
    }

    private static int argmax(float[] v) {
        int best = 0;
        for (int j = 1; j < v.length; j++) if (v[j] > v[best]) best = j;
        return best;
    }
}
