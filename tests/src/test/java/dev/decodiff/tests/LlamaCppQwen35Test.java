package dev.decodiff.tests;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * `decodiff compare --engine llama.cpp` on Qwen3.5, against transformers' references: in f32 every cell llama.cpp's
 * graph gives — the linear attention's q/k/v, β, decay, core output, the conv and recurrent states it writes, the gated
 * attention, the MoE block — agrees to fp32 noise at every step, prefill and decode, so the GGUF (head reordering,
 * norms, −exp(A_log)), the capture mapping (value heads back in transformers' order) and llama.cpp's Qwen3.5 agree.
 */
class LlamaCppQwen35Test {
    static Path root;

    @BeforeAll
    static void setUp() {
        root = LlamaCppSetUp.repoRootAsHome();
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"qwen35-tiny-llamacpp/long", "qwen35-tiny-llamacpp/continuation", "qwen35-tiny-moe-llamacpp/long"})
    void f32LlamaCppMatchesTransformersAtEveryLinearAttentionPointAndState(String refCase) throws Exception {
        var r = Cli.run("compare", root.resolve("reference-dumps/" + refCase).toString(), "--engine", "llama.cpp", "--json");
        assertThat(r.code()).as(r.toString()).isZero();
        var j = r.json();
        assertThat(j.get("observer_effect").asText()).isEqualTo("none");
        assertThat(j.get("only_in_reference")).as("every reference point, the states included, is captured").isEmpty();
        assertThat(j.get("verdict").asText()).isEqualTo("match");
    }

    @Test
    void aCheckpointWithValueHeadsWiderThanKeyHeadsIsRefusedWithTheReason() throws Exception {
        var r = Cli.run("compare", root.resolve("reference-dumps/qwen35-tiny/long").toString(), "--engine", "llama.cpp");
        assertThat(r.code()).as(r.toString()).isNotZero();
        assertThat(r.toString()).contains("linear_value_head_dim must equal linear_key_head_dim");
    }
}
