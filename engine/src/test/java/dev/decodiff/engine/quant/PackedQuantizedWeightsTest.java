package dev.decodiff.engine.quant;

import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.metal.DType;
import dev.decodiff.metal.NativeKernels;
import dev.decodiff.metal.WeightMatrix;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assumptions.assumeThat;

/**
 * A bundled MLX checkpoint run with its 4- and 8-bit matrices kept packed (the kernels dequantize in registers) gives,
 * at every step of a prefill and a decode, logits within the fp32 noise of the same checkpoint dequantized to fp32 at
 * load (whose weights AffineDequantizerTest holds to NumPy's): the GEMM has the dequantized weights' bits
 * (AffineWeightMatrixTest), the matvec (decode, and the prefill's head) sums exactly in integers where the fp32 chain
 * rounds at every column. The packed model must really hold
 * codes, and far fewer bytes.
 */
class PackedQuantizedWeightsTest {
    private static final String PROPERTY = "decodiff.quantized";

    private record Run(float[][] logits, long bytesPerToken, boolean packed) {}

    /** A 13-token prefill (the GEMM), then 8 single-token steps (the matvec) on fixed tokens, so both runs see the same ones. */
    private static Run decode(Path checkpoint, String mode) {
        String before = System.getProperty(PROPERTY);
        System.setProperty(PROPERTY, mode);
        try (var model = Gemma4Model.load(checkpoint)) {
            var session = model.newSession(EngineOptions.defaults());
            int vocab = model.config().vocabSize();
            int[] prompt = new int[13];
            for (int i = 0; i < prompt.length; i++) prompt[i] = (29 * i + 3) % vocab;
            float[][] logits = new float[9][];
            logits[0] = session.forward(prompt);
            for (int s = 1; s < logits.length; s++) logits[s] = session.forward(new int[]{(17 * s + 5) % vocab});
            WeightMatrix q = model.weights().layers().get(0).q(), head = model.weights().lmHead();
            boolean packed = q.packed() && q.dtype() == DType.U32 && head.packed();
            if (!packed) assertThat(q.dtype()).isEqualTo(DType.F32);
            return new Run(logits, model.weightBytesPerToken(), packed);
        } finally {
            if (before == null) System.clearProperty(PROPERTY);
            else System.setProperty(PROPERTY, before);
        }
    }

    @ParameterizedTest
    @CsvSource({"gemma4-tiny-mlx4,4", "gemma4-tiny-mlx8,8", "gemma4-tiny-ple-mlx4,4", "gemma4-tiny-moe-mlx4,4"})
    void packedWeightsGiveTheLogitsOfTheDequantizedWeights(String name, int bits) {
        assumeThat(NativeKernels.affineAvailable()).as(NativeKernels.status()).isTrue();
        var checkpoint = Path.of("..", "checkpoints", name);
        var packed = decode(checkpoint, "packed");
        var fp32 = decode(checkpoint, "dequantize");
        assertThat(packed.packed()).as("4-/8-bit matrices kept as codes").isTrue();
        assertThat(fp32.packed()).isFalse();
        for (int s = 0; s < packed.logits().length; s++) {
            double d = 0, n = 0;
            for (int i = 0; i < fp32.logits()[s].length; i++) {
                double e = packed.logits()[s][i] - fp32.logits()[s][i];
                d += e * e;
                n += (double) fp32.logits()[s][i] * fp32.logits()[s][i];
            }
            // two fp32-grade dots of the same weights, through a random-weight model that amplifies the last bits (0.1-2.3e-6
            // measured); a wrong code, group or scale moves the logits by 1e-2 or more
            assertThat(Math.sqrt(d / n)).as("step %d: rel L2 of the logits against the fp32 weights'", s).isLessThan(1e-5);
        }
        // codes of `bits` bits plus a (scale, bias) pair of bf16 per 64 columns, against 32 bits per weight
        double ratio = (double) packed.bytesPerToken() / fp32.bytesPerToken();
        assertThat(ratio).as("bytes per token, packed over fp32").isBetween(bits / 32.0, (bits + 1.0) / 32.0);
    }
}
