package dev.decodiff.harness.arch.qwen35;

import dev.decodiff.engine.ops.StoredMatrices;
import dev.decodiff.engine.qwen35.Qwen35Model;
import dev.decodiff.engine.qwen35.Qwen35Weights;
import dev.decodiff.harness.llamacpp.GgufStoredTensors;

import java.nio.file.Path;

/**
 * Which of Qwen3.5's matrices each checkpoint tensor a GGUF stores is ({@link GgufStoredTensors} reads them back,
 * checks each against the checkpoint and inverts the converter's plan: its value-head reordering, its expert stacks
 * and splits), for the precision hypothesis "ggml's matmuls on the GGUF's matrices".
 * <p>The input's blocks of 32 (and a Q4_1/Q5_1 block's minimum) are taken along the checkpoint's columns. Only
 * out_proj's columns are reordered by the converter, in whole value heads; where a head is a multiple of 32 wide (every
 * released geometry) its blocks are ggml's, otherwise the hypothesis is off by that regrouping and the cell stays
 * unexplained — an alarm, never a pass.
 */
public final class Qwen35StoredMatrices {
    private Qwen35StoredMatrices() {}

    public static StoredMatrices of(Path gguf, Qwen35Model model) {
        var w = model.weights();
        var s = GgufStoredTensors.read(gguf, model.directory()).bindEmbeddingAndHead(w.embed(), w.lmHead());
        for (int i = 0; i < w.layers().size(); i++) {
            var l = w.layers().get(i);
            String p = "layers." + i + ".";
            switch (l.mixer()) {
                case Qwen35Weights.Linear lin -> s.bind(p + "linear_attn.in_proj_qkv.weight", lin.inProjQkv())
                        .bind(p + "linear_attn.in_proj_z.weight", lin.inProjZ())
                        .bind(p + "linear_attn.in_proj_b.weight", lin.inProjB())
                        .bind(p + "linear_attn.in_proj_a.weight", lin.inProjA())
                        .bind(p + "linear_attn.out_proj.weight", lin.outProj());
                case Qwen35Weights.Full f -> s.bind(p + "self_attn.q_proj.weight", f.q())
                        .bind(p + "self_attn.k_proj.weight", f.k())
                        .bind(p + "self_attn.v_proj.weight", f.v())
                        .bind(p + "self_attn.o_proj.weight", f.o());
            }
            switch (l.ffn()) {
                case Qwen35Weights.Dense d -> dense(s, p + "mlp.", d);
                case Qwen35Weights.Moe m -> {
                    s.bind(p + "mlp.gate.weight", m.router());
                    dense(s, p + "mlp.shared_expert.", m.shared());
                    for (int e = 0; e < m.gate().length; e++) {
                        String x = p + "mlp.experts." + e + ".";
                        int I = m.gate()[e].rows(), H = m.gate()[e].cols();
                        // per-expert tensors, or the released fused layout: gate_up_proj [E, 2I, H] (gate rows first), down_proj [E, H, I]
                        if (s.has(x + "gate_proj.weight"))
                            s.bind(x + "gate_proj.weight", m.gate()[e]).bind(x + "up_proj.weight", m.up()[e]).bind(x + "down_proj.weight", m.down()[e]);
                        else
                            s.bind(p + "mlp.experts.gate_up_proj", m.gate()[e], (long) e * 2 * I * H)
                                    .bind(p + "mlp.experts.gate_up_proj", m.up()[e], (long) e * 2 * I * H + (long) I * H)
                                    .bind(p + "mlp.experts.down_proj", m.down()[e], (long) e * H * I);
                    }
                }
            }
        }
        return s.matrices();
    }

    private static void dense(GgufStoredTensors s, String p, Qwen35Weights.Dense d) {
        s.bind(p + "gate_proj.weight", d.gate()).bind(p + "up_proj.weight", d.up()).bind(p + "down_proj.weight", d.down());
    }
}
