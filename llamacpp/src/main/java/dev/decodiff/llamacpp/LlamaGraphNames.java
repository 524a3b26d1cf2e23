package dev.decodiff.llamacpp;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.llamacpp.ffi.GgmlTensor;
import dev.decodiff.llamacpp.ffi.LlamaCppException;
import dev.decodiff.llamacpp.ffi.LlamaModel;

import java.util.Set;

/**
 * llama.cpp's Llama-family graphs (src/models/llama.cpp, qwen3.cpp and build_qkv/build_attn in src/llama-graph.cpp of
 * the pinned release) read as decodiff's capture points:
 * <table>
 *   <tr><th>graph tensor</th><th>point</th></tr>
 *   <tr><td>embd</td><td>embed (the token rows; the family has no embedding scale)</td></tr>
 *   <tr><td>Qcur-il, Kcur-il (the ggml_rope node)</td><td>attn.q, attn.k: after qwen3's q/k norm and RoPE</td></tr>
 *   <tr><td>Vcur-il (the per-head reshape)</td><td>attn.v</td></tr>
 *   <tr><td>kqv_out-il</td><td>attn.out: heads concatenated, before wo</td></tr>
 *   <tr><td>ffn_out-il (build_ffn's result)</td><td>mlp.out</td></tr>
 *   <tr><td>l_out-il</td><td>out</td></tr>
 *   <tr><td>result_norm, result_output</td><td>final_norm, logits (the last row)</td></tr>
 * </table>
 * build_qkv names the projection, its bias sum and its per-head reshape "Qcur"/"Kcur"/"Vcur" too; only the tensor
 * that goes on (the rotated q and k, the reshaped v) is the point. k_read/v_read come from the attention's cache
 * views ({@link StepCapture}).
 * <p>A llama GGUF holds q_proj and k_proj with each head's rows interleaved (the converter's permute, so that
 * llama.cpp's adjacent-pair RoPE rotates transformers' halves): llama.cpp's q, k and cached keys are in that order,
 * put back here in transformers' order ({@link #unpermute}); qwen3's are not permuted.
 */
final class LlamaGraphNames implements ModelGraphNames {
    private static final Set<String> REPLACEABLE = Set.of(CapturePoints.EMBED, CapturePoints.Q, CapturePoints.K, CapturePoints.V,
            CapturePoints.ATTN_OUT, CapturePoints.MLP_OUT, CapturePoints.OUT, CapturePoints.FINAL_NORM);

    private final String arch;
    private final int headDim;
    /** Whether q, k and the key cache hold each head's dims interleaved (llama), not in transformers' order (qwen3). */
    private final boolean permuted;

    private LlamaGraphNames(String arch, int headDim, boolean permuted) {
        this.arch = arch;
        this.headDim = headDim;
        this.permuted = permuted;
    }

    /** The mapping for a loaded model, or null when it is not of the Llama family. */
    static LlamaGraphNames of(LlamaModel m) {
        String a = m.architecture();
        if (!a.equals("llama") && !a.equals("qwen3")) return null;
        String kl = m.meta(a + ".attention.key_length");
        int d = kl != null ? Integer.parseInt(kl.trim()) : meta(m, a + ".embedding_length") / meta(m, a + ".attention.head_count");
        return new LlamaGraphNames(a, d, a.equals("llama"));
    }

    private static int meta(LlamaModel m, String key) {
        String v = m.meta(key);
        if (v == null) throw new LlamaCppException(m.file() + " has no " + key);
        return Integer.parseInt(v.trim());
    }

    @Override public String name() { return "Llama-family (" + arch + ")"; }

    @Override public Set<String> replaceableKinds() { return REPLACEABLE; }

    @Override
    public String point(GgmlTensor t) {
        String name = t.name();
        switch (name) {
            case "embd" -> { return CapturePoints.EMBED; }
            case "result_norm" -> { return CapturePoints.FINAL_NORM; }
            case "result_output" -> { return CapturePoints.LOGITS; }
            default -> { }
        }
        var p = GraphNames.parse(name);
        if (p.layer() < 0) return null;
        String kind = switch (p.base()) {
            case "Qcur" -> t.op() == GgmlTensor.OP_ROPE ? CapturePoints.Q : null;
            case "Kcur" -> t.op() == GgmlTensor.OP_ROPE ? CapturePoints.K : null;
            case "Vcur" -> t.op() == GgmlTensor.OP_RESHAPE ? CapturePoints.V : null;
            case "kqv_out" -> CapturePoints.ATTN_OUT;
            case "ffn_out" -> residual(t) ? null : CapturePoints.MLP_OUT;
            case "l_out" -> CapturePoints.OUT;
            default -> null;
        };
        return kind == null ? null : CapturePoints.layer(p.layer(), kind);
    }

    /** An "ffn_out" that is the MLP output plus the residual (llama.cpp's llama graph names that sum "ffn_out" too). */
    private static boolean residual(GgmlTensor t) {
        if (t.op() != GgmlTensor.OP_ADD) return false;
        var in = t.src(1);
        return in != null && GraphNames.parse(in.name()).base().equals("ffn_inp");
    }

    @Override
    public LlamaCppRunner.Captured capture(String point, GgmlTensor t) {
        long[] ne = t.ne();
        float[] x = t.toFloats();
        String kind = CapturePoints.layerOf(point) < 0 ? point : CapturePoints.kindOf(point);
        return switch (kind) {
            case CapturePoints.LOGITS -> {
                int v = (int) ne[0];
                yield new LlamaCppRunner.Captured(point, new int[]{v}, java.util.Arrays.copyOfRange(x, x.length - v, x.length));
            }
            case CapturePoints.Q, CapturePoints.K ->
                    new LlamaCppRunner.Captured(point, new int[]{(int) (ne[2] * ne[3]), (int) ne[1], (int) ne[0]}, permuted ? unpermute(x, headDim) : x);
            case CapturePoints.V -> new LlamaCppRunner.Captured(point, new int[]{(int) (ne[2] * ne[3]), (int) ne[1], (int) ne[0]}, x);
            default -> {
                int w = (int) ne[0];
                yield new LlamaCppRunner.Captured(point, new int[]{x.length / w, w}, x);
            }
        };
    }

    /** Only the tensor {@link #point} names carries a point (the rotated q/k, the reshaped v), so it is the one written. */
    @Override
    public boolean carries(String point, GgmlTensor t) { return true; }

    @Override
    public float[] toGraph(String point, GgmlTensor t, float[] value) {
        if (value.length != t.elements())
            throw new LlamaCppException("cannot write " + point + " (" + value.length + " values) into llama.cpp's '" + t.name() + "' of "
                    + t.elements() + " elements: the reference's shape is not this model's");
        String kind = CapturePoints.layerOf(point) < 0 ? point : CapturePoints.kindOf(point);
        boolean qk = kind.equals(CapturePoints.Q) || kind.equals(CapturePoints.K);
        return permuted && qk ? permute(value, headDim) : value;
    }

    @Override
    public float[] keysRead(float[] rows, int d) { return permuted ? unpermute(rows, d) : rows; }

    /** Each d-vector from llama.cpp's interleaved order (dim 2i + j) to transformers' (dim j·d/2 + i). */
    static float[] unpermute(float[] x, int d) {
        var out = new float[x.length];
        int half = d / 2;
        for (int o = 0; o < x.length; o += d)
            for (int i = 0; i < half; i++) {
                out[o + i] = x[o + 2 * i];
                out[o + half + i] = x[o + 2 * i + 1];
            }
        return out;
    }

    /** The inverse of {@link #unpermute}. */
    static float[] permute(float[] x, int d) {
        var out = new float[x.length];
        int half = d / 2;
        for (int o = 0; o < x.length; o += d)
            for (int i = 0; i < half; i++) {
                out[o + 2 * i] = x[o + i];
                out[o + 2 * i + 1] = x[o + half + i];
            }
        return out;
    }
}
