package dev.decodiff.engine.llama;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.Probe;
import dev.decodiff.engine.arch.ModelSession;
import dev.decodiff.engine.ops.Precision;

import java.util.Arrays;
import java.util.Set;

/**
 * One conversation over a {@link LlamaModel}, in fp32, following transformers 5.17's LlamaDecoderLayer top to bottom
 * through the model's {@link LlamaOps} (the ops attribution recomputes with):
 * x += o_proj(attention(rope(q), rope(k), v)) of the input-normed x, then x += down(silu(gate)·up) of the
 * post-attention-normed x. The KV cache holds every position's keys (after qwen3's k_norm and RoPE) and values; every
 * query reads positions 0…p (no sliding window). Probes see every capture point and may replace what they see.
 * Catalog faults ({@link LlamaFault}) switched on run in this same path: the ops' own in {@link LlamaOps#withFaults},
 * the cache and position ones here.
 */
public final class LlamaSession implements ModelSession {
    private final LlamaModel model;
    private final LlamaConfig cfg;
    private final LlamaOps ops;
    private Probe probe;
    private int position;
    private int step;
    /** Per layer: keys and values of positions 0…position−1, [pos][nkv·d]; capacity grows by doubling. */
    private float[][] keys;
    private float[][] values;
    /** Faults kv-write-one-slot-late and decode-rope-position-off-by-one: a decode step's slot and rotation position shift by this. */
    private final int decodeSlotShift, decodeRopeShift;

    LlamaSession(LlamaModel model, Probe probe, Set<LlamaFault> faults) {
        this.model = model;
        this.cfg = model.config();
        this.ops = model.ops().withFaults(faults);
        this.probe = probe;
        decodeSlotShift = faults.contains(LlamaFault.KV_WRITE_ONE_SLOT_LATE) ? 1 : 0;
        decodeRopeShift = faults.contains(LlamaFault.DECODE_ROPE_POSITION_OFF_BY_ONE) ? 1 : 0;
        keys = new float[cfg.numLayers()][0];
        values = new float[cfg.numLayers()][0];
    }

    public LlamaModel model() { return model; }

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
        var P = Precision.EXACT;
        float[] x = ops.embed(tokens, P);
        capture(CapturePoints.EMBED, new int[]{T, H}, x);
        ops.rope().prepare(position, T);
        for (int i = 0; i < cfg.numLayers(); i++) {
            float[] attn = ops.attentionOutput(i, attention(i, ops.inputNorm(i, x, T, P), T), T, P);
            x = LlamaOps.add(x, attn, P);
            float[] mlp = ops.mlp(i, ops.postAttentionNorm(i, x, T, P), T, P);
            capture(CapturePoints.layer(i, CapturePoints.MLP_OUT), new int[]{T, H}, mlp);
            x = LlamaOps.add(x, mlp, P);
            capture(CapturePoints.layer(i, CapturePoints.OUT), new int[]{T, H}, x);
        }
        float[] h = ops.finalNorm(x, T, P);
        capture(CapturePoints.FINAL_NORM, new int[]{T, H}, h);
        float[] logits = ops.logits(h, T, P);
        capture(CapturePoints.LOGITS, new int[]{cfg.vocabSize()}, logits);
        position += T;
        if (probe != null) probe.endStep(step, logits, argmax(logits));
        step++;
        return logits;
    }

    /** Grouped-query attention over the cache, causal; returns attn.out [T, nh·d] (before o_proj). */
    private float[] attention(int i, float[] a, int T) {
        int nkv = cfg.numKvHeads(), d = cfg.headDim();
        boolean decode = T == 1 && position > 0;
        var qkv = ops.qkv(i, a, T, decode ? position + decodeRopeShift : position, Precision.EXACT);
        float[] q = qkv.q(), k = qkv.k(), v = qkv.v();
        capture(CapturePoints.layer(i, CapturePoints.Q), new int[]{T, cfg.numHeads(), d}, q);
        capture(CapturePoints.layer(i, CapturePoints.K), new int[]{T, nkv, d}, k);
        capture(CapturePoints.layer(i, CapturePoints.V), new int[]{T, nkv, d}, v);
        int stride = nkv * d, total = position + T, slot = decode ? position + decodeSlotShift : position;
        if (keys[i].length < (slot + T) * stride) {
            int cap = Math.max(slot + T, 2 * keys[i].length / Math.max(stride, 1)) * stride;
            keys[i] = Arrays.copyOf(keys[i], cap);
            values[i] = Arrays.copyOf(values[i], cap);
        }
        System.arraycopy(k, 0, keys[i], slot * stride, T * stride);
        System.arraycopy(v, 0, values[i], slot * stride, T * stride);
        // what this step's attention reads: the cache, or the probe's replacement of it (for this step only)
        float[] K = read(CapturePoints.layer(i, CapturePoints.K_READ), new int[]{total, nkv, d}, keys[i]);
        float[] V = read(CapturePoints.layer(i, CapturePoints.V_READ), new int[]{total, nkv, d}, values[i]);
        float[] out = ops.attention(q, K, V, T, position, Precision.EXACT);
        capture(CapturePoints.layer(i, CapturePoints.ATTN_OUT), new int[]{T, cfg.numHeads() * d}, out);
        return out;
    }

    // ---------------------------------------------------------------------------------------------------------
    // State
    // ---------------------------------------------------------------------------------------------------------

    @Override
    public Snapshot snapshot() {
        int stride = cfg.numKvHeads() * cfg.headDim();
        var k = new float[keys.length][];
        var v = new float[values.length][];
        for (int i = 0; i < keys.length; i++) {
            k[i] = Arrays.copyOf(keys[i], position * stride);
            v[i] = Arrays.copyOf(values[i], position * stride);
        }
        return new Snapshot(model, position, k, v);
    }

    @Override
    public void restore(ModelSession.State state) {
        if (!(state instanceof Snapshot s) || s.model != model)
            throw new IllegalArgumentException("not a snapshot of a session over " + model.directory());
        position = s.position;
        for (int i = 0; i < keys.length; i++) {
            keys[i] = s.keys[i].clone();
            values[i] = s.values[i].clone();
        }
    }

    /** A session's KV caches (exactly its positions' rows) and its position. */
    public record Snapshot(LlamaModel model, int position, float[][] keys, float[][] values) implements ModelSession.State {}

    // ---------------------------------------------------------------------------------------------------------
    // Helpers
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

    /** The cache rows as read at a point: the cache itself, or a copy the probe saw (and may have replaced). */
    private float[] read(String name, int[] shape, float[] cache) {
        if (probe == null || !probe.wants(name)) return cache;
        float[] copy = Arrays.copyOf(cache, shape[0] * shape[1] * shape[2]);
        capture(name, shape, copy);
        return copy;
    }

    private static int argmax(float[] v) {
        int best = 0;
        for (int j = 1; j < v.length; j++) if (v[j] > v[best]) best = j;
        return best;
    }
}
