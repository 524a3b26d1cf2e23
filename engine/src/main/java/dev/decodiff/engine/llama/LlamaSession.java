package dev.decodiff.engine.llama;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.Probe;
import dev.decodiff.engine.arch.ModelSession;
import dev.decodiff.metal.VectorMath;
import dev.decodiff.metal.WeightMatrix;

import java.util.Arrays;

/**
 * One conversation over a {@link LlamaModel}, in fp32, following transformers 5.17's LlamaDecoderLayer top to bottom:
 * x += o_proj(attention(rope(q), rope(k), v)) of the input-normed x, then x += down(silu(gate)·up) of the
 * post-attention-normed x. The KV cache holds every position's keys (after qwen3's k_norm and RoPE) and values; every
 * query reads positions 0…p (no sliding window). Probes see every capture point and may replace what they see.
 */
public final class LlamaSession implements ModelSession {
    private final LlamaModel model;
    private final LlamaConfig cfg;
    private final LlamaWeights w;
    private Probe probe;
    private int position;
    private int step;
    /** Per layer: keys and values of positions 0…position−1, [pos][nkv·d]; capacity grows by doubling. */
    private float[][] keys;
    private float[][] values;

    LlamaSession(LlamaModel model, Probe probe) {
        this.model = model;
        this.cfg = model.config();
        this.w = model.weights();
        this.probe = probe;
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
        float[] x = new float[T * H];
        for (int t = 0; t < T; t++) w.embed().row(tokens[t], x, t * H);
        capture(CapturePoints.EMBED, new int[]{T, H}, x);
        model.rope().prepare(position, T);
        for (int i = 0; i < cfg.numLayers(); i++) {
            var lw = w.layers().get(i);
            float[] attn = attention(i, lw, rmsNorm(x, T, H, lw.inputNorm()), T);
            VectorMath.add(x, 0, attn, 0, x.length);
            float[] mlp = mlp(lw, rmsNorm(x, T, H, lw.postAttentionNorm()), T);
            capture(CapturePoints.layer(i, CapturePoints.MLP_OUT), new int[]{T, H}, mlp);
            VectorMath.add(x, 0, mlp, 0, x.length);
            capture(CapturePoints.layer(i, CapturePoints.OUT), new int[]{T, H}, x);
        }
        float[] h = rmsNorm(x, T, H, w.finalNorm());
        capture(CapturePoints.FINAL_NORM, new int[]{T, H}, h);
        float[] logits = new float[cfg.vocabSize()];
        w.lmHead().matvec(h, (T - 1) * H, logits, 0);
        capture(CapturePoints.LOGITS, new int[]{cfg.vocabSize()}, logits);
        position += T;
        if (probe != null) probe.endStep(step, logits, argmax(logits));
        step++;
        return logits;
    }

    /** Grouped-query attention over the cache, causal; returns o_proj's output [T, H]. */
    private float[] attention(int i, LlamaWeights.Layer lw, float[] a, int T) {
        int nh = cfg.numHeads(), nkv = cfg.numKvHeads(), d = cfg.headDim();
        float[] q = linear(lw.q(), lw.qBias(), a, T), k = linear(lw.k(), lw.kBias(), a, T), v = linear(lw.v(), lw.vBias(), a, T);
        var rope = model.rope();
        for (int t = 0; t < T; t++) {
            if (lw.qNorm() != null) { // qwen3: each head normalised before RoPE
                for (int h = 0; h < nh; h++) VectorMath.rmsNorm(q, (t * nh + h) * d, d, lw.qNorm(), cfg.rmsNormEps(), q, (t * nh + h) * d);
                for (int h = 0; h < nkv; h++) VectorMath.rmsNorm(k, (t * nkv + h) * d, d, lw.kNorm(), cfg.rmsNormEps(), k, (t * nkv + h) * d);
            }
            rope.apply(q, t * nh * d, nh, position + t);
            rope.apply(k, t * nkv * d, nkv, position + t);
        }
        capture(CapturePoints.layer(i, CapturePoints.Q), new int[]{T, nh, d}, q);
        capture(CapturePoints.layer(i, CapturePoints.K), new int[]{T, nkv, d}, k);
        capture(CapturePoints.layer(i, CapturePoints.V), new int[]{T, nkv, d}, v);
        int stride = nkv * d, total = position + T;
        if (keys[i].length < total * stride) {
            int cap = Math.max(total, 2 * keys[i].length / Math.max(stride, 1)) * stride;
            keys[i] = Arrays.copyOf(keys[i], cap);
            values[i] = Arrays.copyOf(values[i], cap);
        }
        System.arraycopy(k, 0, keys[i], position * stride, T * stride);
        System.arraycopy(v, 0, values[i], position * stride, T * stride);
        // what this step's attention reads: the cache, or the probe's replacement of it (for this step only)
        float[] K = read(CapturePoints.layer(i, CapturePoints.K_READ), new int[]{total, nkv, d}, keys[i]);
        float[] V = read(CapturePoints.layer(i, CapturePoints.V_READ), new int[]{total, nkv, d}, values[i]);

        float scale = (float) Math.pow(d, -0.5);
        int group = nh / nkv;
        float[] out = new float[T * nh * d];
        float[] p = new float[total];
        for (int t = 0; t < T; t++) {
            int n = position + t + 1; // causal: the query at position+t reads 0…position+t
            for (int h = 0; h < nh; h++) {
                int qo = (t * nh + h) * d, kv = (h / group) * d;
                for (int j = 0; j < n; j++) p[j] = VectorMath.dot(q, qo, K, j * stride + kv, d) * scale;
                VectorMath.softmax(p, 0, n);
                for (int j = 0; j < n; j++) VectorMath.axpy(p[j], V, j * stride + kv, out, qo, d);
            }
        }
        capture(CapturePoints.layer(i, CapturePoints.ATTN_OUT), new int[]{T, nh * d}, out);
        return linear(lw.o(), lw.oBias(), out, T);
    }

    /** down(silu(gate(x)) · up(x)). */
    private float[] mlp(LlamaWeights.Layer lw, float[] x, int T) {
        float[] g = linear(lw.gate(), lw.gateBias(), x, T), u = linear(lw.up(), lw.upBias(), x, T);
        for (int j = 0; j < g.length; j++) g[j] = VectorMath.silu(g[j]) * u[j];
        return linear(lw.down(), lw.downBias(), g, T);
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

    /** x·Wᵀ (+ b) for T rows. */
    private static float[] linear(WeightMatrix m, float[] bias, float[] x, int T) {
        float[] y = new float[T * m.rows()];
        m.matmul(x, T, y);
        if (bias != null) for (int t = 0; t < T; t++) VectorMath.add(y, t * bias.length, bias, 0, bias.length);
        return y;
    }

    /** LlamaRMSNorm per row: x·rsqrt(mean(x²)+eps)·w, in fp32. */
    private float[] rmsNorm(float[] x, int T, int n, float[] weight) {
        float[] y = new float[x.length];
        for (int t = 0; t < T; t++) VectorMath.rmsNorm(x, t * n, n, weight, cfg.rmsNormEps(), y, t * n);
        return y;
    }

    private static int argmax(float[] v) {
        int best = 0;
        for (int j = 1; j < v.length; j++) if (v[j] > v[best]) best = j;
        return best;
    }
}
