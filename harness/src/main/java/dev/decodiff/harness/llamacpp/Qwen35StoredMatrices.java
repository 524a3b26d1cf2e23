package dev.decodiff.harness.llamacpp;

import dev.decodiff.engine.qwen35.Qwen35Model;
import dev.decodiff.engine.qwen35.Qwen35Ops;
import dev.decodiff.engine.qwen35.Qwen35Weights;
import dev.decodiff.llamacpp.gguf.GgmlQuants;
import dev.decodiff.llamacpp.gguf.GgmlType;
import dev.decodiff.llamacpp.gguf.GgufFile;
import dev.decodiff.llamacpp.gguf.Qwen35GgufPlan;
import dev.decodiff.metal.WeightMatrix;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.IdentityHashMap;
import java.util.Map;

/**
 * How a Qwen3.5 GGUF stores each of the checkpoint's matrices, for the precision hypothesis "ggml's matmuls on the
 * GGUF's matrices": the type read from the GGUF itself, the checkpoint's weights rounded or quantized to it exactly as
 * the converter writes them (round to nearest even for f16/bf16, quantize_row_q8_0_ref / q4_0's blocks), and the
 * conversion ggml-cpu applies to a matmul's input for that type (its vec_dot_type). Null where a type is not modelled.
 */
public final class Qwen35StoredMatrices {
    private Qwen35StoredMatrices() {}

    public static Map<WeightMatrix, Qwen35Ops.Stored> of(Path gguf, Qwen35Model model) {
        var file = GgufFile.read(gguf);
        var w = model.weights();
        var out = new IdentityHashMap<WeightMatrix, Qwen35Ops.Stored>();
        put(out, file, "embed_tokens.weight", w.embed());
        if (w.lmHead() != w.embed()) put(out, file, "lm_head.weight", w.lmHead());
        for (int i = 0; i < w.layers().size(); i++) {
            var l = w.layers().get(i);
            String p = "layers." + i + ".";
            switch (l.mixer()) {
                case Qwen35Weights.Linear lin -> {
                    put(out, file, p + "linear_attn.in_proj_qkv.weight", lin.inProjQkv());
                    put(out, file, p + "linear_attn.in_proj_z.weight", lin.inProjZ());
                    put(out, file, p + "linear_attn.in_proj_b.weight", lin.inProjB());
                    put(out, file, p + "linear_attn.in_proj_a.weight", lin.inProjA());
                    put(out, file, p + "linear_attn.out_proj.weight", lin.outProj());
                }
                case Qwen35Weights.Full f -> {
                    put(out, file, p + "self_attn.q_proj.weight", f.q());
                    put(out, file, p + "self_attn.k_proj.weight", f.k());
                    put(out, file, p + "self_attn.v_proj.weight", f.v());
                    put(out, file, p + "self_attn.o_proj.weight", f.o());
                }
            }
            switch (l.ffn()) {
                case Qwen35Weights.Dense d -> dense(out, file, p + "mlp.", d);
                case Qwen35Weights.Moe m -> {
                    put(out, file, p + "mlp.gate.weight", m.router());
                    dense(out, file, p + "mlp.shared_expert.", m.shared());
                    for (int e = 0; e < m.gate().length; e++) {
                        String x = p + "mlp.experts." + e + ".";
                        put(out, file, x + "gate_proj.weight", m.gate()[e]);
                        put(out, file, x + "up_proj.weight", m.up()[e]);
                        put(out, file, x + "down_proj.weight", m.down()[e]);
                    }
                }
            }
        }
        return out;
    }

    private static void dense(Map<WeightMatrix, Qwen35Ops.Stored> out, GgufFile file, String p, Qwen35Weights.Dense d) {
        put(out, file, p + "gate_proj.weight", d.gate());
        put(out, file, p + "up_proj.weight", d.up());
        put(out, file, p + "down_proj.weight", d.down());
    }

    private static void put(Map<WeightMatrix, Qwen35Ops.Stored> out, GgufFile file, String hfName, WeightMatrix m) {
        String g = Qwen35GgufPlan.ggufTensorName(hfName);
        if (g == null || !file.hasTensor(g)) return;
        var type = file.tensor(g).type();
        if (type == GgmlType.F32) return; // untouched: the checkpoint's weights, an fp32 input
        int R = m.rows(), C = m.cols();
        float[] wts = new float[R * C];
        for (int r = 0; r < R; r++) m.row(r, wts, r * C);
        var conversion = switch (type) {
            case BF16 -> Qwen35Ops.InputConversion.BF16;
            case F16 -> Qwen35Ops.InputConversion.F16;
            case Q8_0, Q4_0 -> Qwen35Ops.InputConversion.Q8_0;
            default -> null;
        };
        if (conversion == null) return;
        switch (type) {
            case BF16 -> dev.decodiff.engine.ops.Format.BF16.round(wts);
            case F16 -> dev.decodiff.engine.ops.Format.F16.round(wts);
            default -> {
                byte[] q = type == GgmlType.Q8_0 ? GgmlQuants.quantizeQ8_0(wts, 0, wts.length) : GgmlQuants.quantizeQ4_0(wts, 0, wts.length);
                GgmlQuants.dequantize(type, MemorySegment.ofArray(q), 0, wts.length, wts, 0);
            }
        }
        out.put(m, new Qwen35Ops.Stored(wts, type.name(), conversion));
    }
}
