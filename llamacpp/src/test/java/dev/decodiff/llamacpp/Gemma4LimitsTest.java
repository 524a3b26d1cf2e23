package dev.decodiff.llamacpp;

import dev.decodiff.llamacpp.ffi.GgufPreflight;
import dev.decodiff.llamacpp.ffi.LlamaCppException;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The KV-sharing layouts llama.cpp's Gemma 4 handles (the released E2B/E4B) and the one it aborts on (ours). */
class Gemma4LimitsTest {
    /** A header with the layout: pattern repeated, N shared layers. */
    static GgufPreflight.Header header(String pattern, int repeats, int shared) {
        List<Object> swa = new ArrayList<>();
        for (int r = 0; r < repeats; r++) for (char c : pattern.toCharArray()) swa.add(c == 'S');
        return new GgufPreflight.Header(3, 0, 0, "gemma4", Map.of("general.architecture", "gemma4",
                "gemma4.block_count", (long) swa.size(), "gemma4.attention.shared_kv_layers", (long) shared,
                "gemma4.attention.sliding_window_pattern", swa));
    }

    @Test
    void theReleasedKvSharingLayoutsPass() {
        // E2B: [S,S,S,S,F]×7, N=20 (sources 13 and 14); E4B: [S×5,F]×7, N=18 (sources 22 and 23)
        assertThatCode(() -> Gemma4Limits.check(Path.of("e2b.gguf"), header("SSSSF", 7, 20))).doesNotThrowAnyException();
        assertThatCode(() -> Gemma4Limits.check(Path.of("e4b.gguf"), header("SSSSSF", 7, 18))).doesNotThrowAnyException();
        // no sharing at all (26B-A4B, 31B)
        assertThatCode(() -> Gemma4Limits.check(Path.of("31b.gguf"), header("SSSSSF", 10, 0))).doesNotThrowAnyException();
    }

    @Test
    void aLayoutWhoseLastNonSharedLayerIsSlidingIsRefusedWithBothSources() {
        // gemma4-tiny-ple: [S,S,F,S,S,F], N=2: f=4, transformers reads 3 (sliding) and 2 (full); llama.cpp takes 2 and 3
        assertThatThrownBy(() -> Gemma4Limits.check(Path.of("ple.gguf"), header("SSFSSF", 1, 2)))
                .isInstanceOf(LlamaCppException.class)
                .hasMessageContaining("ple.gguf")
                .hasMessageContaining("shared sliding layer 4 reads the cache of layer 3")
                .hasMessageContaining("takes layer 2 (a full layer")
                .hasMessageContaining("abort");
    }

    @Test
    void tooFewNonSharedLayersAreRefused() {
        assertThatThrownBy(() -> Gemma4Limits.check(Path.of("x.gguf"), header("SF", 2, 3)))
                .isInstanceOf(LlamaCppException.class).hasMessageContaining("n_layer_kv_from_start >= 2");
    }
}
