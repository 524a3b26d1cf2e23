package dev.decodiff.harness.dump;

import dev.decodiff.harness.compare.Comparison;
import org.junit.jupiter.api.Test;

import java.util.LinkedHashMap;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Two producers' statements of one MLX quantization are the same model whatever module-path aliases they use
 * (MLX's {@code language_model.model.} for a multimodal checkpoint, {@code model.} for a causal LM, none) and whether
 * they list the modules MLX never quantizes or overrides that repeat the defaults; a real difference names itself.
 */
class QuantizationMeaningTest {
    static DumpManifest.Quantization mlx(int bits, Map<String, String> overrides) {
        return new DumpManifest.Quantization("mlx", "affine", bits, 64, overrides);
    }

    static Map<String, String> map(String... kv) {
        var m = new LinkedHashMap<String, String>();
        for (int i = 0; i < kv.length; i += 2) m.put(kv[i], kv[i + 1]);
        return m;
    }

    @Test
    void aliasesAndImplicitFloatModulesAreTheSameModel() {
        var a = mlx(4, map("language_model.model.layers.1.router.proj", "8-bit, group 64"));
        var b = mlx(4, map("model.layers.1.router.proj", "8-bit, group 64", "model.layers.0.input_layernorm", "not quantized",
                "model.layers.2.mlp.down_proj", "4-bit, group 64"));
        var c = mlx(4, map("layers.1.router.proj", "8-bit, group 64"));
        assertThat(a.differences(b)).isEmpty();
        assertThat(b.differences(c)).isEmpty();
    }

    @Test
    void aRealDifferenceSaysWhatDiffers() {
        var a = mlx(4, map("language_model.model.layers.1.router.proj", "8-bit, group 64"));
        var b = mlx(4, map("model.layers.1.router.proj", "6-bit, group 64"));
        assertThat(a.differences(b)).containsExactly("layers.1.router.proj: 8-bit, group 64 vs 6-bit, group 64");
        var c = mlx(8, null);
        assertThat(mlx(4, null).differences(c)).containsExactly("bits 4 vs 8");
        // a matrix kept float where the other side quantizes it is another model
        assertThat(mlx(4, null).differences(mlx(4, map("model.layers.0.mlp.down_proj", "not quantized"))))
                .containsExactly("layers.0.mlp.down_proj: the defaults vs not quantized");
    }

    @Test
    void checkIdentityRefusesAnotherQuantizationNamingTheDifference() {
        var ref = producer(mlx(4, map("language_model.model.layers.1.router.proj", "8-bit, group 64")));
        var same = producer(mlx(4, map("model.layers.1.router.proj", "8-bit, group 64")));
        var other = producer(mlx(4, map("model.layers.1.router.proj", "4-bit, group 32")));
        assertThat(Comparison.quantizationDiffers(ref, same)).isFalse();
        assertThat(Comparison.quantizationDiffers(ref, other)).isTrue();
    }

    static DumpManifest.Producer producer(DumpManifest.Quantization q) {
        return new DumpManifest.Producer("mlx-lm", "0.30", "float32", null, null, null, null, null, null, null, q);
    }
}
