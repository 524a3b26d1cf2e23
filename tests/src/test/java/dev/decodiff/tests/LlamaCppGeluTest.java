package dev.decodiff.tests;

import dev.decodiff.engine.CheckpointFiles;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.llamacpp.GgufCache;
import dev.decodiff.llamacpp.ffi.GgmlTensor;
import dev.decodiff.llamacpp.ffi.LlamaContext;
import dev.decodiff.llamacpp.ffi.LlamaLibrary;
import dev.decodiff.llamacpp.ffi.LlamaModel;
import dev.decodiff.llamacpp.gguf.GgufOutputType;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The finding behind llama.cpp's first divergent cell (layers.0.mlp.out, step 0), proved by substitution: on
 * llama.cpp's own MLP input, an MLP whose GELU goes through fp16 — x rounded to fp16, GELU looked up in a 65,536-entry
 * fp16 table (ggml-cpu's GGML_GELU_FP16) — reproduces llama.cpp's MLP output to fp32 rounding, while the exact
 * gelu_pytorch_tanh that transformers computes lands at llama.cpp's divergence from the reference, and on the
 * reference itself.
 */
class LlamaCppGeluTest {
    @Test
    void llamaCppsMlpIsTheExactMlpWithGeluRoundedThroughFp16() {
        LlamaCppSetUp.assumeAvailable();
        Path root = ReferenceCases.repoRoot(), ckpt = root.resolve("checkpoints/gemma4-tiny");
        Path gguf = GgufCache.of(ckpt, GgufOutputType.F32);
        var ref = DumpReader.open(root.resolve("reference-dumps/gemma4-tiny/long"));
        int[] prompt = ref.manifest().stepTokens(0);

        Map<String, float[]> got = new HashMap<>();
        var tap = new LlamaContext.Tap() {
            public boolean wants(GgmlTensor t) { return t.name().equals("ffn_norm-0") || t.name().equals("ffn_out-0"); }

            public void take(GgmlTensor t) { got.put(t.name(), t.toFloats()); }
        };
        try (var model = LlamaModel.load(LlamaLibrary.get(), gguf, false);
             var ctx = new LlamaContext(model, LlamaContext.Options.exact(256), tap)) {
            ctx.decode(prompt, 0, true);
        }
        float[] in = got.get("ffn_norm-0"), llama = got.get("ffn_out-0");
        assertThat(in).isNotNull();
        assertThat(llama).isNotNull();

        float[] exact, fp16Gelu, reference;
        try (var w = CheckpointFiles.open(ckpt)) {
            var gate = w.all().get("model.layers.0.mlp.gate_proj.weight");
            var up = w.all().get("model.layers.0.mlp.up_proj.weight");
            var down = w.all().get("model.layers.0.mlp.down_proj.weight");
            exact = mlp(in, gate, up, down, false);
            fp16Gelu = mlp(in, gate, up, down, true);
        }
        try (var step = ref.readStep(0)) {
            reference = step.tensor("layers.0.mlp.out").toFloats();
        }
        String figures = String.format("rel L2: llama.cpp vs fp16-GELU MLP %.2e, reference vs exact MLP %.2e, llama.cpp vs exact MLP %.2e, llama.cpp vs reference %.2e",
                relL2(llama, fp16Gelu), relL2(reference, exact), relL2(llama, exact), relL2(reference, llama));
        System.out.println(figures);
        // the fp16 GELU is llama.cpp's MLP (a fp32 summation-order difference can flip an fp16 rounding now and then)
        assertThat(relL2(llama, fp16Gelu)).as(figures).isLessThan(1e-5);
        // the exact GELU is transformers' MLP (llama.cpp's input differs from the reference's by ~5e-7)
        assertThat(relL2(reference, exact)).as(figures).isLessThan(5e-6);
        // and between the two lies the divergence decodiff reports: ~2.6e-4, over the 1e-4 fp32 tolerance
        assertThat(relL2(llama, exact)).as(figures).isBetween(1e-4, 1e-3);
        assertThat(relL2(reference, llama)).as(figures).isBetween(1e-4, 1e-3);
    }

    /** down(gelu(gate·x) ⊙ up·x) per row, in double; x rows of H, gate/up [I, H], down [H, I]. */
    static float[] mlp(float[] x, dev.decodiff.metal.TensorView gate, dev.decodiff.metal.TensorView up, dev.decodiff.metal.TensorView down, boolean fp16Gelu) {
        int I = (int) gate.shape()[0], H = (int) gate.shape()[1], T = x.length / H;
        float[] out = new float[T * H];
        for (int t = 0; t < T; t++) {
            float[] h = new float[I];
            for (int i = 0; i < I; i++) {
                double g = 0, u = 0;
                for (int k = 0; k < H; k++) {
                    g += (double) gate.getFloat((long) i * H + k) * x[t * H + k];
                    u += (double) up.getFloat((long) i * H + k) * x[t * H + k];
                }
                h[i] = (float) (gelu((float) g, fp16Gelu) * (float) u);
            }
            for (int o = 0; o < H; o++) {
                double s = 0;
                for (int i = 0; i < I; i++) s += (double) down.getFloat((long) o * I + i) * h[i];
                out[t * H + o] = (float) s;
            }
        }
        return out;
    }

    /** gelu_pytorch_tanh; with fp16, as ggml-cpu computes it: fp16 table of GELU at the fp16-rounded input, in (−10, 10). */
    static float gelu(float x, boolean fp16) {
        if (!fp16) return geluTanh(x);
        if (x <= -10f) return 0f;
        if (x >= 10f) return x;
        return Float.float16ToFloat(Float.floatToFloat16(geluTanh(Float.float16ToFloat(Float.floatToFloat16(x)))));
    }

    static float geluTanh(float x) {
        double v = x;
        return (float) (0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v * v * v))));
    }

    static double relL2(float[] a, float[] b) {
        double d = 0, n = 0;
        for (int i = 0; i < a.length; i++) {
            d += ((double) a[i] - b[i]) * ((double) a[i] - b[i]);
            n += (double) b[i] * b[i];
        }
        return Math.sqrt(d / n);
    }
}
