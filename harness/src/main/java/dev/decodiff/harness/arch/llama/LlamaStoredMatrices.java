package dev.decodiff.harness.arch.llama;

import dev.decodiff.engine.llama.LlamaModel;
import dev.decodiff.engine.ops.StoredMatrices;
import dev.decodiff.harness.llamacpp.GgufStoredTensors;

import java.nio.file.Path;

/**
 * Which of the Llama family's matrices each checkpoint tensor a GGUF stores is ({@link GgufStoredTensors} reads them
 * back, checks each against the checkpoint and undoes llama's q/k head permutation), for the precision hypothesis
 * "ggml's matmuls on the GGUF's matrices": the embedding (looked up by get_rows, and the output matrix where the head is
 * tied), the head, and every layer's projections. Biases and norms stay F32 in a GGUF: the checkpoint's.
 */
public final class LlamaStoredMatrices {
    private LlamaStoredMatrices() {}

    public static StoredMatrices of(Path gguf, LlamaModel model) {
        var s = GgufStoredTensors.read(gguf, model.directory());
        var w = model.weights();
        s.bind("embed_tokens.weight", w.embed());
        if (w.lmHead() != w.embed()) s.bind("lm_head.weight", w.lmHead());
        for (int i = 0; i < w.layers().size(); i++) {
            var l = w.layers().get(i);
            String a = "layers." + i + ".self_attn.", m = "layers." + i + ".mlp.";
            s.bind(a + "q_proj.weight", l.q()).bind(a + "k_proj.weight", l.k()).bind(a + "v_proj.weight", l.v()).bind(a + "o_proj.weight", l.o())
                    .bind(m + "gate_proj.weight", l.gate()).bind(m + "up_proj.weight", l.up()).bind(m + "down_proj.weight", l.down());
        }
        return s.matrices();
    }
}
