package dev.decodiff.llamacpp;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.llamacpp.ffi.GgmlTensor;
import dev.decodiff.llamacpp.ffi.LlamaCppException;
import dev.decodiff.llamacpp.ffi.LlamaModel;

import java.util.Map;

/**
 * llama.cpp's Qwen3.5 graph (src/models/qwen35.cpp, qwen35moe.cpp, delta-net-base.cpp of the pinned release) read as
 * decodiff's capture points. Two things differ from a plain name table:
 * <ul>
 *   <li>The GGUF stores the linear-attention value heads in tiled order (value head j·Hk + g pairs with key head g;
 *   Qwen35GgufPlan), transformers in grouped order (head g·r + j). Every per-value-head tensor (v, β, decay, core
 *   output, states, the conv's v channels) is put back in grouped order here, so points compare head by head.</li>
 *   <li>With the fused gated-delta-net op there is no head repeat: q and k are captured per key head and expanded to
 *   the value heads as transformers' repeat_interleave does.</li>
 * </ul>
 * The states: conv_state_read is the memory module's conv state as the layer reads it ("conv_states_reshaped",
 * [K−1, C]); conv_state is what it writes back (the last K−1 columns of "conv_input"); state_read is the recurrent
 * state read ("state_predelta"), state the one written ("new_state", the final-state part of the op's result).
 */
final class Qwen35GraphNames implements ModelGraphNames {
    private final int hk, hv, dk, dv, kernel;
    private final boolean moe;

    private Qwen35GraphNames(int hk, int hv, int dk, int dv, int kernel, boolean moe) {
        this.hk = hk;
        this.hv = hv;
        this.dk = dk;
        this.dv = dv;
        this.kernel = kernel;
        this.moe = moe;
    }

    /** The mapping for a loaded model, or null when it is not Qwen3.5. */
    static Qwen35GraphNames of(LlamaModel m) {
        String a = m.architecture();
        if (!a.equals("qwen35") && !a.equals("qwen35moe")) return null;
        int hk = meta(m, a + ".ssm.group_count"), hv = meta(m, a + ".ssm.time_step_rank");
        int dk = meta(m, a + ".ssm.state_size"), inner = meta(m, a + ".ssm.inner_size");
        return new Qwen35GraphNames(hk, hv, dk, inner / hv, meta(m, a + ".ssm.conv_kernel"), a.equals("qwen35moe"));
    }

    private static int meta(LlamaModel m, String key) {
        String v = m.meta(key);
        if (v == null) throw new LlamaCppException(m.file() + " has no " + key);
        return Integer.parseInt(v.trim());
    }

    /** graph base name → point kind, for the names that map one to one. */
    static final Map<String, String> TABLE = Map.ofEntries(
            Map.entry("conv_states_reshaped", CapturePoints.LINEAR_CONV_STATE_READ),
            Map.entry("conv_input", CapturePoints.LINEAR_CONV_STATE),
            Map.entry("q_conv_predelta", CapturePoints.LINEAR_Q),
            Map.entry("k_conv_predelta", CapturePoints.LINEAR_K),
            Map.entry("v_conv_predelta", CapturePoints.LINEAR_V),
            Map.entry("beta_sigmoid", CapturePoints.LINEAR_BETA),
            Map.entry("gate", CapturePoints.LINEAR_DECAY),
            Map.entry("state_predelta", CapturePoints.LINEAR_STATE_READ),
            Map.entry("attn_output", CapturePoints.LINEAR_CORE_OUT),
            Map.entry("new_state", CapturePoints.LINEAR_STATE),
            Map.entry("linear_attn_out", CapturePoints.LINEAR_OUT),
            Map.entry("Qcur", CapturePoints.Q),
            Map.entry("Kcur", CapturePoints.K),
            Map.entry("Vcur", CapturePoints.V),
            Map.entry("gate_sigmoid", CapturePoints.ATTN_GATE),
            Map.entry("attn_gated", CapturePoints.ATTN_OUT),
            Map.entry("l_out", CapturePoints.OUT));

    @Override public String name() { return "Qwen3.5"; }

    @Override public java.util.Set<String> replaceableKinds() { return REPLACEABLE; }

    /** The capture point a graph tensor gives, or null. */
    @Override
    public String point(GgmlTensor t) {
        String name = t.name();
        switch (name) {
            case "model.input_embed" -> { return CapturePoints.EMBED; }
            case "result_norm" -> { return CapturePoints.FINAL_NORM; }
            case "result_output" -> { return CapturePoints.LOGITS; }
            default -> { }
        }
        var p = GraphNames.parse(name);
        if (p.layer() < 0) return null;
        if (p.base().equals("ffn_out")) return CapturePoints.layer(p.layer(), moe ? CapturePoints.MOE_OUT : CapturePoints.MLP_OUT);
        String kind = TABLE.get(p.base());
        if (kind == null) return null;
        // a full-attention layer's "attn_output" is its o_proj product; a linear layer's is the delta rule's output
        if (kind.equals(CapturePoints.LINEAR_CORE_OUT) && t.op() == GgmlTensor.OP_MUL_MAT) return null;
        // "Kcur"/"Vcur" are named twice: the raw 2-D projection, then the per-head tensor that enters the cache,
        // which comes later in the graph and replaces the first capture
        return CapturePoints.layer(p.layer(), kind);
    }

    /** The tensor in the point's row-major shape, value heads in transformers' grouped order. */
    @Override
    public LlamaCppRunner.Captured capture(String point, GgmlTensor t) {
        long[] ne = t.ne();
        float[] x = t.toFloats();
        String kind = CapturePoints.layerOf(point) < 0 ? point : CapturePoints.kindOf(point);
        int T;
        switch (kind) {
            case CapturePoints.LOGITS -> {
                int v = (int) ne[0];
                return new LlamaCppRunner.Captured(point, new int[]{v}, java.util.Arrays.copyOfRange(x, x.length - v, x.length));
            }
            case CapturePoints.LINEAR_CONV_STATE_READ, CapturePoints.LINEAR_CONV_STATE -> {
                int cols = (int) ne[0], c = (int) ne[1], keep = kernel - 1;
                var out = new float[keep * c];
                int chanQk = 2 * hk * dk;
                for (int ch = 0; ch < c; ch++) {
                    int dst = ch < chanQk ? ch : chanQk + (int) grouped(ch - chanQk, dv);
                    for (int j = 0; j < keep; j++) out[j * c + dst] = x[ch * cols + cols - keep + j];
                }
                return new LlamaCppRunner.Captured(point, new int[]{keep, c}, out);
            }
            case CapturePoints.LINEAR_Q, CapturePoints.LINEAR_K -> {
                int d = (int) ne[0], heads = (int) ne[1];
                T = (int) (ne[2] * ne[3]);
                var out = new float[T * hv * d];
                for (int t0 = 0; t0 < T; t0++)
                    for (int h = 0; h < hv; h++) {
                        // grouped value head h = g·r + j reads key head g
                        int r = hv / hk, g = h / r, j = h % r;
                        int src = heads == hk ? g : j * hk + g;
                        System.arraycopy(x, (t0 * heads + src) * d, out, (t0 * hv + h) * d, d);
                    }
                return new LlamaCppRunner.Captured(point, new int[]{T, hv, d}, out);
            }
            case CapturePoints.LINEAR_V, CapturePoints.LINEAR_CORE_OUT -> {
                T = (int) (ne[2] * ne[3]);
                return new LlamaCppRunner.Captured(point, new int[]{T, hv, dv}, regroupRows(x, T, dv));
            }
            case CapturePoints.LINEAR_BETA, CapturePoints.LINEAR_DECAY -> {
                T = (int) (x.length / hv);
                return new LlamaCppRunner.Captured(point, new int[]{T, hv}, regroupRows(x, T, 1));
            }
            case CapturePoints.LINEAR_STATE_READ, CapturePoints.LINEAR_STATE -> {
                // ggml's state is ne {S_v, S_v, H}: per head dv rows of dk (ne0 runs over the key index)
                var out = new float[hv * dk * dv];
                for (int h = 0; h < hv; h++) {
                    int src = (int) tiledOf(h);
                    for (int i = 0; i < dk; i++)
                        for (int j = 0; j < dv; j++) out[(h * dk + i) * dv + j] = x[(src * dv + j) * dk + i];
                }
                return new LlamaCppRunner.Captured(point, new int[]{hv, dk, dv}, out);
            }
            case CapturePoints.Q, CapturePoints.K, CapturePoints.V -> {
                T = (int) (ne[2] * ne[3]);
                return new LlamaCppRunner.Captured(point, new int[]{T, (int) ne[1], (int) ne[0]}, x);
            }
            default -> {
                int w = (int) ne[0];
                return new LlamaCppRunner.Captured(point, new int[]{x.length / w, w}, x);
            }
        }
    }

    /**
     * The points bisect can write into llama.cpp's graph (each a contiguous tensor the next ops read): the layer's
     * input and output, the states as read from the memory module, the attention's q/k/v/gate/output, the
     * linear-attention output and the FFN's. The linear layer's q/k/v, β and decay are strided views or ops folded
     * into the fused delta-net op: they are compared, computed by llama.cpp from the replaced states and input.
     */
    static final java.util.Set<String> REPLACEABLE = java.util.Set.of(CapturePoints.EMBED, CapturePoints.FINAL_NORM,
            CapturePoints.LINEAR_CONV_STATE_READ, CapturePoints.LINEAR_STATE_READ, CapturePoints.LINEAR_OUT,
            CapturePoints.Q, CapturePoints.K, CapturePoints.V, CapturePoints.ATTN_GATE, CapturePoints.ATTN_OUT,
            CapturePoints.MLP_OUT, CapturePoints.MOE_OUT, CapturePoints.OUT);

    /**
     * Whether this graph tensor is the one that carries the point's value into what follows: "Kcur" is first the raw
     * projection (k_norm and RoPE still to come), then the rotated per-head tensor; "Vcur" is the projection, then its
     * per-head reshape (the same memory). Writing the point into the first would feed it through k_norm and RoPE
     * again, and would hide llama.cpp's own V behind the replaced one.
     */
    @Override
    public boolean carries(String point, GgmlTensor t) {
        String kind = CapturePoints.layerOf(point) < 0 ? point : CapturePoints.kindOf(point);
        return switch (kind) {
            case CapturePoints.K, CapturePoints.V -> t.op() != GgmlTensor.OP_MUL_MAT;
            default -> true;
        };
    }

    /** The inverse of {@link #capture}: the point's row-major values (grouped value heads) in the graph tensor's layout. */
    @Override
    public float[] toGraph(String point, GgmlTensor t, float[] value) {
        long[] ne = t.ne();
        String kind = CapturePoints.layerOf(point) < 0 ? point : CapturePoints.kindOf(point);
        switch (kind) {
            case CapturePoints.LINEAR_CONV_STATE_READ -> {
                int cols = (int) ne[0], c = (int) ne[1], keep = kernel - 1;
                if (cols != keep || value.length != keep * c) throw shape(point, t, value);
                var x = new float[cols * c];
                int chanQk = 2 * hk * dk;
                for (int ch = 0; ch < c; ch++) {
                    int dst = ch < chanQk ? ch : chanQk + (int) grouped(ch - chanQk, dv);
                    for (int j = 0; j < keep; j++) x[ch * cols + j] = value[j * c + dst];
                }
                return x;
            }
            case CapturePoints.LINEAR_STATE_READ -> {
                if (value.length != hv * dk * dv) throw shape(point, t, value);
                var x = new float[value.length];
                for (int h = 0; h < hv; h++) {
                    int src = (int) tiledOf(h);
                    for (int i = 0; i < dk; i++)
                        for (int j = 0; j < dv; j++) x[(src * dv + j) * dk + i] = value[(h * dk + i) * dv + j];
                }
                return x;
            }
            default -> {
                if (value.length != t.elements()) throw shape(point, t, value);
                return value;
            }
        }
    }

    private static LlamaCppException shape(String point, GgmlTensor t, float[] value) {
        return new LlamaCppException("cannot write " + point + " (" + value.length + " values) into llama.cpp's '" + t.name() + "' of "
                + t.elements() + " elements: the reference's shape is not this model's");
    }

    /** Rows of hv heads × d (tiled order) → grouped order. */
    private float[] regroupRows(float[] x, int T, int d) {
        var out = new float[x.length];
        for (int t0 = 0; t0 < T; t0++)
            for (int h = 0; h < hv; h++)
                System.arraycopy(x, (int) ((t0 * hv + tiledOf(h)) * d), out, (t0 * hv + h) * d, d);
        return out;
    }

    /** The tiled position of grouped value head h = g·r + j: j·Hk + g. */
    private long tiledOf(int h) {
        int r = hv / hk;
        return (long) (h % r) * hk + h / r;
    }

    /** The grouped index of element i of a tiled axis of heads of d elements. */
    private long grouped(long i, int d) {
        int r = hv / hk;
        long head = i / d, within = i % d, j = head / hk, g = head % hk;
        return (g * r + j) * d + within;
    }
}
