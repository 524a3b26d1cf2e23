package dev.decodiff.harness.arch.llama;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.llama.LlamaConfig;
import dev.decodiff.engine.llama.LlamaModel;
import dev.decodiff.engine.llama.LlamaOps;
import dev.decodiff.engine.ops.Format;
import dev.decodiff.engine.ops.Precision;
import dev.decodiff.engine.ops.StoredMatrices;
import dev.decodiff.harness.compare.attribution.LocalError;
import dev.decodiff.harness.compare.attribution.RecordedInputsAttribution;

import java.util.List;
import java.util.function.Function;

/**
 * Local attribution of a Llama-family side (llama, mistral, qwen3): every capture point recomputed by
 * {@link LlamaOps} (the ops the engine's own forward runs) from the side's own recorded inputs — q/k/v (after qwen3's
 * q/k norms and RoPE) from the layer's input; the cache reads from the previous step's reads and this step's k/v;
 * attn.out from q, k_read, v_read; mlp.out from the layer's input and attn.out (through o_proj, the residual and the
 * post-attention norm); the layer's out from the input, attn.out and mlp.out; the final norm from the last layer's
 * out; the logits from the final norm. Its hypotheses: a framework in bf16 or fp16 (RoPE's frequencies held in fp32
 * or in that dtype), uniform bf16/fp16 matmul inputs, fp32 arithmetic over weights held in bf16 or fp16, and a KV
 * cache stored as f16, bf16, q8_0 or q4_0. Where the GGUF llama.cpp runs is known ({@link LlamaOps#withStored}), ggml's
 * matmuls and embedding lookups on its own stored matrices (quantized ones included) replace the uniform matmul
 * inputs: a quantized file's weights are then the candidate's own, not a divergence.
 */
public final class LlamaAttribution extends RecordedInputsAttribution {
    private final LlamaOps ops;
    private final LlamaConfig cfg;

    /**
     * @param everyCell measure every cell (a third-party candidate); false: only cells over tolerance (decodiff's own
     *                  engine, whose ops are these ops)
     */
    public LlamaAttribution(LlamaModel model, boolean everyCell) { this(model.ops(), everyCell, null, false); }

    /** With the GGUF's stored matrices known: ggml's matmuls on them become a hypothesis (a llama.cpp candidate). */
    public LlamaAttribution(LlamaOps ops, boolean everyCell) { this(ops, everyCell, null, false); }

    private LlamaAttribution(LlamaOps ops, boolean everyCell, Format stated, boolean reference) {
        super(everyCell, stated, reference);
        this.ops = ops;
        this.cfg = ops.config();
    }

    @Override
    public LlamaAttribution stating(String dtype) { return new LlamaAttribution(ops, everyCell, classOf(dtype), reference); }

    @Override
    public LlamaAttribution forReference(String dtype) {
        var f = classOf(dtype);
        return new LlamaAttribution(ops.model().ops(), false, f == null ? Format.F32 : f, true);
    }

    /** The GGUF tensors the stored-matrix hypothesis refused (not the checkpoint's within their type's rounding). */
    @Override
    public List<String> notes() { return StoredMatrices.notes(ops.stored()); }

    @Override
    public boolean carriesAcrossSteps(String kind) { return CapturePoints.isCacheRead(kind); }

    // ---- one cell ----------------------------------------------------------------------------------------------

    @Override
    protected int numLayers() { return cfg.numLayers(); }

    @Override
    protected LocalError attribute(String point, String kind, int layer, float[] cand) {
        double tol = FP32.tolerance(point);
        String in = layer < 0 ? null : layer == 0 ? CapturePoints.EMBED : CapturePoints.layer(layer - 1, CapturePoints.OUT);
        String attn = layer < 0 ? null : CapturePoints.layer(layer, CapturePoints.ATTN_OUT);
        String missing = null;
        Function<Precision, float[]> op;
        String from;
        List<Precision> hyps = matmulHypotheses();
        switch (kind) {
            case CapturePoints.EMBED -> {
                op = p -> ops.embed(stepTokens, p);
                from = "the tokens";
                hyps = withStored(withWeightsHeld(activationHypotheses()));
            }
            case CapturePoints.Q, CapturePoints.K, CapturePoints.V -> {
                if (!have.containsKey(in)) missing = in;
                op = p -> {
                    var qkv = ops.qkv(layer, ops.inputNorm(layer, have.get(in), T, p), T, start, p);
                    return switch (kind) {
                        case CapturePoints.Q -> qkv.q();
                        case CapturePoints.K -> qkv.k();
                        default -> qkv.v();
                    };
                };
                from = in;
            }
            case CapturePoints.K_READ, CapturePoints.V_READ -> {
                boolean keys = kind.equals(CapturePoints.K_READ);
                return cacheRead(point, keys, cand, tol, get(layer, keys ? CapturePoints.K : CapturePoints.V), previous.get(point),
                        cfg.numKvHeads() * cfg.headDim());
            }
            case CapturePoints.ATTN_OUT -> {
                for (String n : List.of(CapturePoints.Q, CapturePoints.K_READ, CapturePoints.V_READ))
                    if (!have.containsKey(CapturePoints.layer(layer, n))) missing = CapturePoints.layer(layer, n);
                var shortRead = missing == null ? cacheReadsShort(point, layer, cfg.numKvHeads() * cfg.headDim(), tol) : null;
                if (shortRead != null) return shortRead;
                op = p -> ops.attention(get(layer, CapturePoints.Q), get(layer, CapturePoints.K_READ), get(layer, CapturePoints.V_READ), T, start, p);
                from = "its q, k_read, v_read";
                hyps = activationHypotheses();
            }
            case CapturePoints.MLP_OUT -> {
                if (!have.containsKey(in)) missing = in;
                else if (!have.containsKey(attn)) missing = attn;
                op = p -> ops.mlp(layer, ops.postAttentionNorm(layer, residual(layer, in, p), T, p), T, p);
                from = in + ", " + attn;
            }
            case CapturePoints.OUT -> {
                String mlp = CapturePoints.layer(layer, CapturePoints.MLP_OUT);
                for (String n : List.of(in, attn, mlp)) if (!have.containsKey(n)) missing = n;
                op = p -> LlamaOps.add(residual(layer, in, p), have.get(mlp), p);
                from = in + ", " + attn + ", " + mlp;
            }
            case CapturePoints.FINAL_NORM -> {
                String last = CapturePoints.layer(cfg.numLayers() - 1, CapturePoints.OUT);
                if (!have.containsKey(last)) missing = last;
                op = p -> ops.finalNorm(have.get(last), T, p);
                from = last;
                hyps = withWeightsHeld(activationHypotheses());
            }
            case CapturePoints.LOGITS -> {
                if (!have.containsKey(CapturePoints.FINAL_NORM)) missing = CapturePoints.FINAL_NORM;
                op = p -> ops.logits(have.get(CapturePoints.FINAL_NORM), T, p);
                from = CapturePoints.FINAL_NORM;
            }
            default -> {
                return null;
            }
        }
        if (missing != null) return LocalError.unattributed(step, point, tol, "the side has no " + missing + ", an input of this op");
        return judge(point, kind, cand, tol, op, null, from, null, hyps);
    }

    /**
     * The framework classes, uniform bf16/fp16 matmul inputs, and fp32 arithmetic over weights held in bf16 or fp16;
     * where the GGUF's stored matrices are known, ggml's matmuls on them instead of the uniform inputs.
     */
    private List<Precision> matmulHypotheses() {
        return ops.stored() == null ? withWeightsHeld(uniformMatmulHypotheses()) : withStored(withWeightsHeld(activationHypotheses()));
    }

    /** These hypotheses and, where the GGUF's stored matrices are known, ggml's matmuls and lookups on them. */
    private List<Precision> withStored(List<Precision> hs) {
        if (ops.stored() == null) return hs;
        var out = new java.util.ArrayList<>(hs);
        out.add(Precision.EXACT.withStoredMatrices(true));
        return out;
    }

    /** These hypotheses and, besides them, fp32 arithmetic over every parameter held in bf16 or fp16. */
    private static List<Precision> withWeightsHeld(List<Precision> hs) {
        var out = new java.util.ArrayList<>(hs);
        for (var f : List.of(Format.BF16, Format.F16)) out.add(Precision.EXACT.withWeights(f));
        return out;
    }

    // ---- shared sub-results --------------------------------------------------------------------------------------

    /** The residual after attention: the layer's input plus o_proj of attn.out (recomputed each time, never cached). */
    private float[] residual(int layer, String in, Precision p) {
        return LlamaOps.add(have.get(in), ops.attentionOutput(layer, get(layer, CapturePoints.ATTN_OUT), T, p), p);
    }
}
