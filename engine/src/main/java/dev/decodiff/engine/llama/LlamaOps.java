package dev.decodiff.engine.llama;

import dev.decodiff.engine.Rope;
import dev.decodiff.engine.RopeSpec;
import dev.decodiff.engine.ops.Format;
import dev.decodiff.engine.ops.Precision;
import dev.decodiff.engine.ops.StoredMatrices;
import dev.decodiff.metal.DType;
import dev.decodiff.metal.VectorMath;
import dev.decodiff.metal.WeightMatrix;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.Set;

/**
 * The Llama family's ops, the one description of its math: {@link LlamaSession}'s forward calls these with
 * {@link Precision#EXACT}, and attribution calls them to recompute a capture point from a side's own recorded inputs,
 * exactly or under a precision hypothesis. Under {@link Precision#EXACT} each op runs the fp32 kernels the engine has
 * always run, to the bit. Each op rounds where that kind of engine rounds: {@code activations} (a framework running
 * the model in bf16/fp16: after every linear — bias included, as addmm adds it before its one rounding — norm, RoPE
 * product, attention output, SiLU, product and add; RMSNorm's statistics in fp32, its normalised value cast before
 * the weight multiplies it, as LlamaRMSNorm does; softmax in fp32, the probabilities cast before P·V);
 * {@code ropeFrequencies} (the inverse frequencies held in the model's dtype before the fp32 angle position·inv_freq);
 * {@code matmulInput} (ggml converting a matmul's input for half-precision weights). Either way the weights are held
 * in that format too, as such an engine holds them (a framework in bf16 casts every parameter, ggml runs bf16/f16
 * matrices): a no-op on a half-precision checkpoint, a rounded copy of each matrix (fp32 values, made once) of an fp32 one.
 * {@code weights} alone holds every parameter so (matrices, norm weights, biases) with the arithmetic fp32: an engine
 * that casts an fp32 checkpoint to bf16 or fp16 and computes in fp32. {@code storedMatrices} ({@link #withStored}):
 * ggml on a GGUF's own matrices — each matmul by the matrix as the GGUF stores it (dequantized) with its input
 * converted to the type's vec-dot type, each embedding row looked up in the stored matrix; biases and norm weights, F32
 * in a GGUF, as the checkpoint holds them; a matrix the GGUF keeps F32 (or that was refused) as the checkpoint's.
 * <p>An instance {@link #withFaults with catalog faults} runs the same ops with those bugs switched on, for a
 * session's exact forward only; the model's own instance (attribution's) has none, and each fault is one flag
 * tested where its bug lives.
 */
public final class LlamaOps {
    private final LlamaModel model;
    private final LlamaConfig cfg;
    private final LlamaWeights w;
    /** Per format, each fp32 matrix rounded to it, made on first use. */
    private final Map<Format, Map<WeightMatrix, WeightMatrix>> held;
    private final Set<LlamaFault> faults;
    /** How a GGUF stores each matrix (null: nothing known, every matrix as the checkpoint's). */
    private final StoredMatrices stored;
    private final boolean ropeInterleaved, kvTiled, qkNormMissing, qkNormAfterRope, scaleInvD, onePlusWeight,
            gateUpSwapped, maskExcludesCurrent, lmHeadTied;
    /** The RoPE every layer applies: the model's, or the unscaled one under rope-scaling-ignored. */
    private final Rope rope;

    public LlamaOps(LlamaModel model) {
        this(model, Set.of(), Collections.synchronizedMap(new java.util.EnumMap<>(Format.class)), null);
    }

    private LlamaOps(LlamaModel model, Set<LlamaFault> faults, Map<Format, Map<WeightMatrix, WeightMatrix>> held, StoredMatrices stored) {
        this.model = model;
        this.stored = stored;
        this.cfg = model.config();
        this.w = model.weights();
        this.held = held;
        this.faults = Set.copyOf(faults);
        ropeInterleaved = faults.contains(LlamaFault.ROPE_INTERLEAVED);
        kvTiled = faults.contains(LlamaFault.KV_HEADS_TILED);
        qkNormMissing = faults.contains(LlamaFault.QK_NORM_MISSING);
        qkNormAfterRope = faults.contains(LlamaFault.QK_NORM_AFTER_ROPE);
        scaleInvD = faults.contains(LlamaFault.ATTN_SCALE_INV_D);
        onePlusWeight = faults.contains(LlamaFault.RMSNORM_ONE_PLUS_WEIGHT);
        gateUpSwapped = faults.contains(LlamaFault.SWIGLU_GATE_UP_SWAPPED);
        maskExcludesCurrent = faults.contains(LlamaFault.DECODE_MASK_EXCLUDES_CURRENT);
        lmHeadTied = faults.contains(LlamaFault.LM_HEAD_TIED);
        rope = faults.contains(LlamaFault.ROPE_SCALING_IGNORED) && cfg.ropeScaling() != null
                ? Rope.ofInverseFrequencies(Rope.inverseFrequencies(RopeSpec.defaultRope(cfg.ropeTheta()), cfg.headDim()), cfg.headDim())
                : model.rope();
    }

    /** These ops with catalog faults switched on (this instance where there are none); the matrices' rounded copies are shared. */
    public LlamaOps withFaults(Set<LlamaFault> faults) {
        return faults.isEmpty() && this.faults.isEmpty() ? this : new LlamaOps(model, faults, held, stored);
    }

    /** These ops knowing how a GGUF stores each matrix, for {@link Precision#storedMatrices()} (absent matrices: the checkpoint's). */
    public LlamaOps withStored(StoredMatrices stored) { return new LlamaOps(model, faults, held, stored); }

    /** How the GGUF stores the matrices (null when these ops do not know it). */
    public StoredMatrices stored() { return stored; }

    /** The RoPE these ops rotate with: a session prepares a step's positions on it. */
    public Rope rope() { return rope; }

    public LlamaConfig config() { return cfg; }

    public LlamaModel model() { return model; }

    // ---- embedding, norms and the end ---------------------------------------------------------------------------

    /** The embedding rows of the tokens [T, H] (no scaling in this family). */
    public float[] embed(int[] tokens, Precision p) {
        int T = tokens.length, H = cfg.hidden();
        float[] x = new float[T * H];
        var s = storedOf(w.embed(), p);
        if (s != null) { // ggml's get_rows dequantizes the stored row
            for (int t = 0; t < T; t++) s.row(tokens[t], H, x, t * H);
            return act(x, p);
        }
        for (int t = 0; t < T; t++) w.embed().row(tokens[t], x, t * H);
        // the rows as the matrix is held ({@link #heldIn(WeightMatrix, Format)}: an fp32 checkpoint's rounded)
        return act(w.embed().dtype() == DType.F32 ? heldIn(x, weightFormat(p)) : x, p);
    }

    /** input_layernorm of a layer's input residual. */
    public float[] inputNorm(int layer, float[] x, int T, Precision p) { return rmsNorm(x, T, cfg.hidden(), w.layers().get(layer).inputNorm(), p); }

    /** post_attention_layernorm of the residual after attention. */
    public float[] postAttentionNorm(int layer, float[] x, int T, Precision p) {
        return rmsNorm(x, T, cfg.hidden(), w.layers().get(layer).postAttentionNorm(), p);
    }

    /** The final norm [T, H]. */
    public float[] finalNorm(float[] x, int T, Precision p) { return rmsNorm(x, T, cfg.hidden(), w.finalNorm(), p); }

    /** logits [V] of the last row of the final norm. */
    public float[] logits(float[] finalNorm, int T, Precision p) {
        int H = cfg.hidden();
        var head = lmHeadTied ? w.embed() : w.lmHead();
        var s = storedOf(head, p);
        if (s != null) return act(s.matmul(Arrays.copyOfRange(finalNorm, (T - 1) * H, T * H), 1, head.rows(), H), p);
        float[] in = p.matmulInput() == Format.F32 ? finalNorm : p.matmulInput().round(Arrays.copyOfRange(finalNorm, (T - 1) * H, T * H));
        int off = in == finalNorm ? (T - 1) * H : 0;
        float[] logits = new float[cfg.vocabSize()];
        heldIn(head, weightFormat(p)).matvec(in, off, logits, 0);
        return act(logits, p);
    }

    // ---- attention ------------------------------------------------------------------------------------------------

    /** q [T, nh·d] and k [T, nkv·d] after qwen3's q/k norms and RoPE, v [T, nkv·d]. */
    public record Qkv(float[] q, float[] k, float[] v) {}

    /** q/k/v projections of the input-normed rows at positions start…start+T−1, q and k normalised (qwen3) and rotated. */
    public Qkv qkv(int layer, float[] normed, int T, int start, Precision p) {
        var lw = w.layers().get(layer);
        int nh = cfg.numHeads(), nkv = cfg.numKvHeads(), d = cfg.headDim();
        float[] q = linear(lw.q(), lw.qBias(), normed, T, p), k = linear(lw.k(), lw.kBias(), normed, T, p), v = linear(lw.v(), lw.vBias(), normed, T, p);
        boolean qkNorm = lw.qNorm() != null && !qkNormMissing;
        if (qkNorm && !qkNormAfterRope) qkNorm(q, k, lw, T, p); // qwen3: each head normalised before RoPE
        rope(q, nh, T, start, p);
        rope(k, nkv, T, start, p);
        if (qkNorm && qkNormAfterRope) qkNorm(q, k, lw, T, p);
        return new Qkv(q, k, v);
    }

    private void qkNorm(float[] q, float[] k, LlamaWeights.Layer lw, int T, Precision p) {
        int d = cfg.headDim();
        for (int h = 0; h < T * cfg.numHeads(); h++) rmsNormInPlace(q, h * d, d, lw.qNorm(), p);
        for (int h = 0; h < T * cfg.numKvHeads(); h++) rmsNormInPlace(k, h * d, d, lw.kNorm(), p);
    }

    /**
     * Rotate-half RoPE of every head of x [T, heads·d] at positions start…: the angle the fp32 product
     * float(position)·inv_freq[j] with inv_freq as the engine holds it ({@link Precision#frequenciesAsHeld}); in a
     * half-precision framework cos and sin are cast to its dtype and each product and sum is rounded.
     */
    private void rope(float[] x, int heads, int T, int start, Precision p) {
        var f = p.activations();
        int d = cfg.headDim(), half = d / 2;
        if (ropeInterleaved) {
            interleavedRope(x, heads, T, start);
            return;
        }
        if (f == Format.F32) {
            Rope r = p.ropeFrequencies() == Format.F32 ? rope : Rope.ofInverseFrequencies(p.frequenciesAsHeld(rope.invFreq()), d);
            if (r != rope) r.prepare(start, T);
            for (int t = 0; t < T; t++) r.apply(x, t * heads * d, heads, start + t);
            return;
        }
        float[] inv = p.frequenciesAsHeld(rope.invFreq());
        float[] cos = new float[half], sin = new float[half];
        for (int t = 0; t < T; t++) {
            float pos = start + t;
            for (int j = 0; j < half; j++) {
                float ang = pos * inv[j];
                cos[j] = f.round((float) StrictMath.cos(ang));
                sin[j] = f.round((float) StrictMath.sin(ang));
            }
            for (int h = 0; h < heads; h++) {
                int o = (t * heads + h) * d;
                for (int j = 0; j < half; j++) {
                    float a = x[o + j], b = x[o + j + half];
                    x[o + j] = f.round(f.round(a * cos[j]) - f.round(b * sin[j]));
                    x[o + j + half] = f.round(f.round(b * cos[j]) + f.round(a * sin[j]));
                }
            }
        }
    }

    /** The fault rope-interleaved (exact arithmetic only): pair j is (x[2j], x[2j+1]), GPT-J's, at the checkpoint's frequencies. */
    private void interleavedRope(float[] x, int heads, int T, int start) {
        int d = cfg.headDim();
        float[] inv = rope.invFreq();
        for (int t = 0; t < T; t++) {
            float pos = start + t;
            for (int j = 0; j < d / 2; j++) {
                float ang = pos * inv[j], c = (float) StrictMath.cos(ang), s = (float) StrictMath.sin(ang);
                for (int h = 0; h < heads; h++) {
                    int o = (t * heads + h) * d + 2 * j;
                    float a = x[o], b = x[o + 1];
                    x[o] = a * c - b * s;
                    x[o + 1] = b * c + a * s;
                }
            }
        }
    }

    /**
     * attn.out [T, nh·d] (before o_proj): causal softmax(q·kᵀ/√d)·v per head over keys/values of positions
     * 0…start+T−1 ([pos][nkv·d]), query head h reading KV head h/(nh/nkv). A half-precision framework casts the
     * probabilities before P·V and the output after it.
     */
    public float[] attention(float[] q, float[] keys, float[] values, int T, int start, Precision p) {
        int nh = cfg.numHeads(), nkv = cfg.numKvHeads(), d = cfg.headDim(), stride = nkv * d, group = nh / nkv;
        var f = p.activations();
        float scale = scaleInvD ? 1f / d : (float) Math.pow(d, -0.5);
        // the fault decode-mask-excludes-current: a one-token step on a warm cache leaves out its own key
        int dropOwn = maskExcludesCurrent && T == 1 && start > 0 ? 1 : 0;
        float[] out = new float[T * nh * d];
        float[] pr = new float[start + T];
        for (int t = 0; t < T; t++) {
            int n = start + t + 1 - dropOwn; // causal: the query at start+t reads 0…start+t
            for (int h = 0; h < nh; h++) {
                int qo = (t * nh + h) * d, kv = (kvTiled ? h % nkv : h / group) * d;
                for (int j = 0; j < n; j++) pr[j] = VectorMath.dot(q, qo, keys, j * stride + kv, d) * scale;
                VectorMath.softmax(pr, 0, n);
                if (f != Format.F32) f.round(pr, 0, n);
                for (int j = 0; j < n; j++) VectorMath.axpy(pr[j], values, j * stride + kv, out, qo, d);
                if (f != Format.F32) f.round(out, qo, d);
            }
        }
        return out;
    }

    /** o_proj of attn.out: the attention block's output [T, H]. */
    public float[] attentionOutput(int layer, float[] attnOut, int T, Precision p) {
        var lw = w.layers().get(layer);
        return linear(lw.o(), lw.oBias(), attnOut, T, p);
    }

    // ---- residual and MLP -----------------------------------------------------------------------------------------

    /** a + b, rounded as the model's dtype adds. */
    public static float[] add(float[] a, float[] b, Precision p) {
        float[] out = a.clone();
        VectorMath.add(out, 0, b, 0, out.length);
        return act(out, p);
    }

    /** mlp.out [T, H]: down(silu(gate(x))·up(x)) of the post-attention-normed rows. */
    public float[] mlp(int layer, float[] normed, int T, Precision p) {
        var lw = w.layers().get(layer);
        var f = p.activations();
        float[] g = linear(lw.gate(), lw.gateBias(), normed, T, p), u = linear(lw.up(), lw.upBias(), normed, T, p);
        if (gateUpSwapped) {
            float[] t = g;
            g = u;
            u = t;
        }
        if (f == Format.F32) for (int j = 0; j < g.length; j++) g[j] = VectorMath.silu(g[j]) * u[j];
        else for (int j = 0; j < g.length; j++) g[j] = f.round(f.round(VectorMath.silu(g[j])) * u[j]);
        return linear(lw.down(), lw.downBias(), g, T, p);
    }

    // ---- the sub-ops, where each kind of engine rounds ---------------------------------------------------------------

    private static float[] act(float[] a, Precision p) {
        p.activations().round(a, 0, a.length);
        return a;
    }

    /**
     * x·Wᵀ (+ b) for T rows: the weights as held ({@link #weightFormat}), the input rounded under matmulInput, the
     * output (bias added, the bias in the model's dtype) under activations; under storedMatrices the matrix as the GGUF
     * stores it, its input converted to the type's vec-dot type.
     */
    private float[] linear(WeightMatrix m, float[] bias, float[] x, int T, Precision p) {
        var s = storedOf(m, p);
        float[] y;
        if (s != null) y = s.matmul(x, T, m.rows(), m.cols());
        else {
            y = new float[T * m.rows()];
            heldIn(m, weightFormat(p)).matmul(p.matmulInput() == Format.F32 ? x : p.matmulInput().round(x.clone()), T, y);
        }
        if (bias != null) {
            float[] b = paramFormat(p) == Format.F32 ? bias : heldIn(bias.clone(), paramFormat(p));
            for (int t = 0; t < T; t++) VectorMath.add(y, t * b.length, b, 0, b.length);
        }
        return act(y, p);
    }

    /** The matrix as the GGUF stores it, under storedMatrices where these ops know it; null otherwise. */
    private StoredMatrices.Stored storedOf(WeightMatrix m, Precision p) { return p.storedMatrices() && stored != null ? stored.get(m) : null; }

    /** The format the vectors (norm weights, biases) are held in: the model's dtype, else {@code weights} (ggml keeps them F32). */
    private static Format paramFormat(Precision p) { return p.activations() != Format.F32 ? p.activations() : p.weights(); }

    /** The format the matrices are held in: the model's dtype under activations, else the matmuls' input format, else {@code weights}. */
    private static Format weightFormat(Precision p) {
        return p.activations() != Format.F32 ? p.activations() : p.matmulInput() != Format.F32 ? p.matmulInput() : p.weights();
    }

    /**
     * The matrix as held in f: itself where f is fp32 or the checkpoint holds it in a half format already (bf16 weights
     * taken as held in fp16 too: they differ only below fp16's normal range, and a copy of a large model's every
     * matrix is not made for that); an fp32 matrix's values rounded to f, made once and kept as fp32 values, so the
     * matmul is the fp32 kernel's on them (a bf16 matrix's kernels may round the input too).
     */
    private WeightMatrix heldIn(WeightMatrix m, Format f) {
        if (f == Format.F32 || m.dtype() != DType.F32) return m;
        var byMatrix = held.computeIfAbsent(f, k -> Collections.synchronizedMap(new IdentityHashMap<>()));
        return byMatrix.computeIfAbsent(m, x -> {
            int R = x.rows(), C = x.cols();
            var seg = Arena.ofAuto().allocate((long) R * C * Float.BYTES, 64);
            float[] row = new float[C];
            for (int r = 0; r < R; r++) {
                x.row(r, row, 0);
                MemorySegment.copy(heldIn(row, f), 0, seg, ValueLayout.JAVA_FLOAT, (long) r * C * Float.BYTES, C);
            }
            return new WeightMatrix(x.name(), DType.F32, R, C, seg);
        });
    }

    /**
     * Parameters held in f, rounded in place (round to nearest even, never the envelope's sampled rounding: a model's
     * parameters are fixed, whatever its arithmetic does).
     */
    private static float[] heldIn(float[] v, Format f) {
        if (f == Format.F32) return v;
        for (int j = 0; j < v.length; j++) v[j] = f == Format.BF16 ? Float.intBitsToFloat(bf16Bits(v[j]) << 16) : Float.float16ToFloat(Float.floatToFloat16(v[j]));
        return v;
    }

    private static short bf16Bits(float x) {
        if (Float.isNaN(x)) return (short) (Float.floatToRawIntBits(x) >>> 16);
        int b = Float.floatToRawIntBits(x);
        return (short) ((b + 0x7FFF + ((b >>> 16) & 1)) >>> 16);
    }

    /** LlamaRMSNorm per row: x·rsqrt(mean(x²)+eps) in fp32, cast to the model's dtype, then times w (and cast). */
    private float[] rmsNorm(float[] x, int T, int n, float[] weight, Precision p) {
        float[] y = new float[x.length];
        for (int t = 0; t < T; t++) rmsNorm(x, t * n, n, weight, p, y, t * n);
        return y;
    }

    private void rmsNormInPlace(float[] x, int o, int n, float[] weight, Precision p) { rmsNorm(x, o, n, weight, p, x, o); }

    private void rmsNorm(float[] x, int o, int n, float[] weight, Precision p, float[] y, int yo) {
        var f = p.activations();
        if (onePlusWeight) { // the fault rmsnorm-one-plus-weight (exact arithmetic only)
            float[] w1 = weight.clone();
            for (int j = 0; j < n; j++) w1[j] += 1f;
            VectorMath.rmsNorm(x, o, n, w1, cfg.rmsNormEps(), y, yo);
            return;
        }
        if (f == Format.F32) {
            VectorMath.rmsNorm(x, o, n, p.weights() == Format.F32 ? weight : heldIn(weight.clone(), p.weights()), cfg.rmsNormEps(), y, yo);
            return;
        }
        VectorMath.rmsNorm(x, o, n, null, cfg.rmsNormEps(), y, yo);
        float[] wf = heldIn(weight.clone(), f);
        for (int j = 0; j < n; j++) y[yo + j] = f.round(wf[j] * f.round(y[yo + j]));
    }
}
