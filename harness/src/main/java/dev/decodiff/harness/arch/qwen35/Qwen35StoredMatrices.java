package dev.decodiff.harness.arch.qwen35;

import dev.decodiff.engine.CheckpointFiles;
import dev.decodiff.engine.qwen35.Qwen35Model;
import dev.decodiff.engine.qwen35.Qwen35Ops;
import dev.decodiff.engine.qwen35.Qwen35Weights;
import dev.decodiff.llamacpp.gguf.GgmlQuants;
import dev.decodiff.llamacpp.gguf.GgmlType;
import dev.decodiff.llamacpp.gguf.GgufFile;
import dev.decodiff.llamacpp.gguf.GgufOutputType;
import dev.decodiff.llamacpp.gguf.HfToGguf;
import dev.decodiff.metal.WeightMatrix;

import java.nio.file.Path;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.Map;

/**
 * How a Qwen3.5 GGUF stores each of the checkpoint's matrices, for the precision hypothesis "ggml's matmuls on the
 * GGUF's matrices": the values are the GGUF's own (dequantized as ggml does), put back into the checkpoint's order by
 * inverting the converter's plan (its value-head reordering, its expert stacks and splits) — not the checkpoint's
 * weights quantized again, since llama_model_quantize picks its own types per matrix and quantizes the reordered rows,
 * whose blocks are not the checkpoint's. Each type's matmul input is converted as ggml-cpu does (its vec_dot_type).
 * A type whose input conversion is not modelled is left out, so its cells stay unexplained rather than excused.
 * <p>The input's blocks of 32 (and a Q4_1/Q5_1 block's minimum) are taken along the checkpoint's columns. Only
 * out_proj's columns are reordered by the converter, in whole value heads; where a head is a multiple of 32 wide (every
 * released geometry) its blocks are ggml's, otherwise the hypothesis is off by that regrouping and the cell stays
 * unexplained — an alarm, never a pass.
 */
public final class Qwen35StoredMatrices {
    private Qwen35StoredMatrices() {}

    public static Map<WeightMatrix, Qwen35Ops.Stored> of(Path gguf, Qwen35Model model) {
        var file = GgufFile.read(gguf);
        var types = new HashMap<String, GgmlType>();
        var hf = new HashMap<String, float[]>();
        try (var files = CheckpointFiles.open(model.directory())) {
            var plan = HfToGguf.plan(model.directory(), files, GgufOutputType.F32);
            for (var p : plan.tensors()) {
                if (!file.hasTensor(p.name()) || p.source() == null && p.derived() == null) continue;
                var type = file.tensor(p.name()).type();
                if (type == GgmlType.F32 || p.ne().length < 2 || !GgmlQuants.dequantizes(type) && type != GgmlType.F16 && type != GgmlType.BF16) continue;
                float[] stored = file.floats(p.name());
                var d = p.derived();
                var sources = d == null ? java.util.List.of(p.source()) : d.sources();
                int per = stored.length / sources.size();
                for (int s = 0; s < sources.size(); s++) {
                    String src = sources.get(s);
                    float[] dst = hf.computeIfAbsent(src, n -> new float[Math.toIntExact(elements(files.all().get(n).shape()))]);
                    types.merge(src, type, (a, b) -> a == b ? a : null);
                    for (int i = 0; i < per; i++) dst[d == null ? i : (int) d.index().applyAsLong(i)] = stored[s * per + i];
                }
            }
        }
        var out = new IdentityHashMap<WeightMatrix, Qwen35Ops.Stored>();
        var w = model.weights();
        var byText = new HashMap<String, String>();
        for (String full : hf.keySet()) byText.put(textName(full), full);
        put(out, byText, hf, types, "embed_tokens.weight", w.embed(), 0);
        if (w.lmHead() != w.embed()) put(out, byText, hf, types, "lm_head.weight", w.lmHead(), 0);
        for (int i = 0; i < w.layers().size(); i++) {
            var l = w.layers().get(i);
            String p = "layers." + i + ".";
            switch (l.mixer()) {
                case Qwen35Weights.Linear lin -> {
                    put(out, byText, hf, types, p + "linear_attn.in_proj_qkv.weight", lin.inProjQkv(), 0);
                    put(out, byText, hf, types, p + "linear_attn.in_proj_z.weight", lin.inProjZ(), 0);
                    put(out, byText, hf, types, p + "linear_attn.in_proj_b.weight", lin.inProjB(), 0);
                    put(out, byText, hf, types, p + "linear_attn.in_proj_a.weight", lin.inProjA(), 0);
                    put(out, byText, hf, types, p + "linear_attn.out_proj.weight", lin.outProj(), 0);
                }
                case Qwen35Weights.Full f -> {
                    put(out, byText, hf, types, p + "self_attn.q_proj.weight", f.q(), 0);
                    put(out, byText, hf, types, p + "self_attn.k_proj.weight", f.k(), 0);
                    put(out, byText, hf, types, p + "self_attn.v_proj.weight", f.v(), 0);
                    put(out, byText, hf, types, p + "self_attn.o_proj.weight", f.o(), 0);
                }
            }
            switch (l.ffn()) {
                case Qwen35Weights.Dense d -> dense(out, byText, hf, types, p + "mlp.", d);
                case Qwen35Weights.Moe m -> {
                    put(out, byText, hf, types, p + "mlp.gate.weight", m.router(), 0);
                    dense(out, byText, hf, types, p + "mlp.shared_expert.", m.shared());
                    for (int e = 0; e < m.gate().length; e++) {
                        String x = p + "mlp.experts." + e + ".";
                        int I = m.gate()[e].rows(), H = m.gate()[e].cols();
                        // per-expert tensors, or the released fused layout: gate_up_proj [E, 2I, H] (gate rows first), down_proj [E, H, I]
                        if (byText.containsKey(x + "gate_proj.weight")) {
                            put(out, byText, hf, types, x + "gate_proj.weight", m.gate()[e], 0);
                            put(out, byText, hf, types, x + "up_proj.weight", m.up()[e], 0);
                            put(out, byText, hf, types, x + "down_proj.weight", m.down()[e], 0);
                        } else {
                            put(out, byText, hf, types, p + "mlp.experts.gate_up_proj", m.gate()[e], (long) e * 2 * I * H);
                            put(out, byText, hf, types, p + "mlp.experts.gate_up_proj", m.up()[e], (long) e * 2 * I * H + (long) I * H);
                            put(out, byText, hf, types, p + "mlp.experts.down_proj", m.down()[e], (long) e * H * I);
                        }
                    }
                }
            }
        }
        return out;
    }

    private static void dense(Map<WeightMatrix, Qwen35Ops.Stored> out, Map<String, String> byText, Map<String, float[]> hf,
                              Map<String, GgmlType> types, String p, Qwen35Weights.Dense d) {
        put(out, byText, hf, types, p + "gate_proj.weight", d.gate(), 0);
        put(out, byText, hf, types, p + "up_proj.weight", d.up(), 0);
        put(out, byText, hf, types, p + "down_proj.weight", d.down(), 0);
    }

    /** The matrix's values from the HF-ordered stored tensor {@code text} at {@code offset}, with its type's input conversion. */
    private static void put(Map<WeightMatrix, Qwen35Ops.Stored> out, Map<String, String> byText, Map<String, float[]> hf,
                            Map<String, GgmlType> types, String text, WeightMatrix m, long offset) {
        String full = byText.get(text);
        if (full == null) return;
        var type = types.get(full);
        var conversion = type == null ? null : conversion(type);
        if (conversion == null) return;
        int n = m.rows() * m.cols();
        float[] wts = java.util.Arrays.copyOfRange(hf.get(full), Math.toIntExact(offset), Math.toIntExact(offset + n));
        out.put(m, new Qwen35Ops.Stored(wts, type.name(), conversion));
    }

    /**
     * ggml-cpu's vec_dot_type per weight type: the input is rounded to f16/bf16, or quantized to q8_0 blocks (Q8_0, Q4_0,
     * Q5_0), q8_1 blocks (Q4_1, Q5_1: q8_0's values plus an fp16 block sum that meets the weights' minimum) or q8_K
     * super-blocks (the K-quants).
     */
    private static Qwen35Ops.InputConversion conversion(GgmlType type) {
        return switch (type) {
            case BF16 -> Qwen35Ops.InputConversion.BF16;
            case F16 -> Qwen35Ops.InputConversion.F16;
            case Q8_0, Q4_0, Q5_0 -> Qwen35Ops.InputConversion.Q8_0;
            case Q4_1, Q5_1 -> Qwen35Ops.InputConversion.Q8_1;
            case Q4_K, Q5_K, Q6_K -> Qwen35Ops.InputConversion.Q8_K;
            default -> null;
        };
    }

    /** The name below the text model's prefix, as the weights are addressed here. */
    private static String textName(String name) {
        for (String prefix : new String[]{"model.language_model.", "model."})
            if (name.startsWith(prefix)) return name.substring(prefix.length());
        return name;
    }

    private static long elements(long[] shape) {
        long n = 1;
        for (long s : shape) n *= s;
        return n;
    }
}
