package dev.decodiff.tests;

import dev.decodiff.harness.llamacpp.GgufCache;
import dev.decodiff.llamacpp.LlamaCppRunner;
import dev.decodiff.llamacpp.ffi.LlamaContext;
import dev.decodiff.llamacpp.ffi.LlamaCppException;
import dev.decodiff.llamacpp.gguf.GgufOutputType;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * `decodiff compare --engine llama.cpp` end to end on the bundled checkpoints, asserting what docs/engines/llama.cpp.md
 * reports: the first divergence at layers.0.mlp.out of the prefill (llama.cpp's GELU goes through fp16; proved in
 * LlamaCppGeluTest) with every upstream cell at fp32 agreement, a match against the bf16 reference under its noise
 * floor, and the KV-sharing checkpoint refused (llama.cpp would abort on it).
 */
class LlamaCppCompareTest {
    static Path root;

    @TempDir
    Path tmp;

    @BeforeAll
    static void setUp() {
        root = LlamaCppSetUp.repoRootAsHome();
    }


    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"gemma4-tiny/long", "gemma4-tiny/short", "gemma4-tiny-moe/long"})
    void byAccumulatedErrorLlamaCppDivergesFirstAtTheFirstMlpOutputByFp16GeluNoiseWithEverythingUpstreamExact(String refCase) throws Exception {
        var r = Cli.run("compare", root.resolve("reference-dumps/" + refCase).toString(), "--engine", "llama.cpp", "--json", "--no-attribution");
        assertThat(r.code()).as(r.toString()).isEqualTo(1);
        var j = r.json();
        var fd = j.get("first_divergence");
        assertThat(fd.get("step").asInt()).isZero();
        assertThat(fd.get("point").asText()).isEqualTo("layers.0.mlp.out");
        // fp16 rounding of GELU's input and output: relative 2^-11 per element at most, a few 1e-4 in L2
        assertThat(fd.get("rel_l2").asDouble()).isBetween(1e-4, 1e-3);
        assertThat(j.get("observer_effect").asText()).isEqualTo("none");
        assertThat(j.get("tokens").get("flip").asInt()).isZero();
        assertThat(j.get("only_in_reference")).as("every reference point, k_read and v_read included, is captured").isEmpty();
        // the cells just upstream (q, k, v, k_read, v_read, attn.out of layer 0) agree to fp32 noise
        assertThat(fd.get("upstream")).isNotEmpty();
        for (var u : fd.get("upstream")) assertThat(u.get("rel_l2").asDouble()).as(u.toString()).isLessThan(2e-6);
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"gemma4-tiny/long", "gemma4-tiny/short", "gemma4-tiny-moe/long", "gemma4-tiny-ple-e2b/long"})
    void attributedCleanLlamaCppIsPrecisionNamingTheFp16GeluTableAtTheFirstMlp(String refCase) throws Exception {
        var r = Cli.run("compare", root.resolve("reference-dumps/" + refCase).toString(), "--engine", "llama.cpp", "--json");
        assertThat(r.code()).as(r.toString()).isZero();
        var j = r.json();
        assertThat(j.get("verdict").asText()).isEqualTo("precision");
        var cells = j.get("attribution").get("cells");
        assertThat(cells.size()).as("every compared cell is attributed").isEqualTo(j.get("cells").asInt());
        String firstEffect = null;
        for (var c : cells) {
            assertThat(c.get("status").asText()).as(c.toString()).isIn("exact", "precision");
            if (firstEffect == null && c.get("status").asText().equals("precision")) {
                firstEffect = c.get("step").asInt() + " " + c.get("point").asText();
                assertThat(c.get("explanation").asText()).startsWith("GELU through an fp16 table");
                // what the op added is fp16 rounding; the fp16-table GELU reproduces llama.cpp's output to fp32 noise
                assertThat(c.get("local_rel_l2").asDouble()).isBetween(1e-4, 1e-3);
                assertThat(c.get("leftover").asDouble()).isLessThan(1e-5);
            }
        }
        assertThat(firstEffect).isEqualTo("0 layers.0.mlp.out");
        var strict = Cli.run("compare", root.resolve("reference-dumps/" + refCase).toString(), "--engine", "llama.cpp", "--exact");
        assertThat(strict.code()).as(strict.toString()).isEqualTo(1);
    }

    @Test
    void withFlashAttentionTheKeysReadAreTheF16CopiesItCastsTheCacheToAndItsFp16AccumulationIsNamed() throws Exception {
        var acc = Cli.run("compare", root.resolve("reference-dumps/gemma4-tiny/short").toString(), "--engine", "llama.cpp",
                "--flash-attn", "--json", "--no-attribution");
        assertThat(acc.code()).as(acc.toString()).isEqualTo(1);
        var fd = acc.json().get("first_divergence");
        assertThat(fd.get("step").asInt()).isZero();
        assertThat(fd.get("point").asText()).isEqualTo("layers.0.attn.k_read");
        assertThat(fd.get("rel_l2").asDouble()).isBetween(1e-4, 1e-3); // f16 rounding: 2^-11 relative at most
        var r = Cli.run("compare", root.resolve("reference-dumps/gemma4-tiny/short").toString(), "--engine", "llama.cpp",
                "--flash-attn", "--json");
        assertThat(r.code()).as(r.toString()).isZero();
        var j = r.json();
        assertThat(j.get("verdict").asText()).isEqualTo("precision");
        assertThat(j.get("only_in_reference")).as("k_read/v_read are read from the fused op's sources").isEmpty();
        assertThat(j.get("observer_effect").asText()).isEqualTo("none");
        var names = new java.util.ArrayList<String>();
        for (var e : j.get("attribution").get("precision_effects")) names.add(e.get("explanation").asText());
        assertThat(names).anyMatch(n -> n.startsWith("keys stored as f16"));
        assertThat(names).anyMatch(n -> n.contains("flash attention in fp16"));
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"bf16", "f16"})
    void halfPrecisionWeightsAreNamedAsTheMatmulInputsRounding(String type) throws Exception {
        var r = Cli.run("compare", root.resolve("reference-dumps/gemma4-tiny-moe/long").toString(), "--engine", "llama.cpp",
                "--gguf-type", type, "--json", "--no-observer-check");
        assertThat(r.code()).as(r.toString()).isZero();
        var j = r.json();
        // judged by the bf16 profile (half-precision weights) every cell may be within tolerance: match, the effects named all the same
        assertThat(j.get("verdict").asText()).isIn("precision", "match");
        var names = new java.util.ArrayList<String>();
        for (var e : j.get("attribution").get("precision_effects")) names.add(e.get("explanation").asText());
        assertThat(names).anyMatch(n -> n.contains("rounded to " + (type.equals("f16") ? "fp16" : "bf16")));
        for (var c : j.get("attribution").get("cells")) assertThat(c.get("status").asText()).as(c.toString()).isIn("exact", "precision");
    }

    @Test
    void moeWithBf16WeightsDivergesWhereTheRouterFlipsANearTieByAccumulatedError() throws Exception {
        var r = Cli.run("compare", root.resolve("reference-dumps/gemma4-tiny-moe/long").toString(), "--engine", "llama.cpp",
                "--gguf-type", "bf16", "--json", "--no-observer-check", "--no-attribution");
        assertThat(r.code()).as(r.toString()).isEqualTo(1);
        var fd = r.json().get("first_divergence");
        assertThat(fd.get("step").asInt()).isEqualTo(1);
        assertThat(fd.get("point").asText()).isEqualTo("layers.3.moe.out");
        assertThat(fd.get("rel_l2").asDouble()).isGreaterThan(0.5); // another expert's output, not rounding
    }

    @Test
    void theKvSharingCheckpointIsRefusedBeforeLlamaCppCouldAbortTheJvm() {
        var r = Cli.run("compare", root.resolve("reference-dumps/gemma4-tiny-ple/short").toString(), "--engine", "llama.cpp");
        assertThat(r.code()).as(r.toString()).isEqualTo(2);
        assertThat(r.err()).contains("shared sliding layer 4 reads the cache of layer 3").contains("takes layer 2")
                .contains("GGML_ASSERT").doesNotContain("internal error");
    }

    @Test
    void aGgufOfAnotherCheckpointIsRefusedNotCompared() {
        var r0 = Cli.run("gguf", "--model", root.resolve("checkpoints/gemma4-tiny-moe").toString(), "--out", tmp.resolve("moe.gguf").toString());
        assertThat(r0.code()).as(r0.toString()).isZero();
        var r = Cli.run("compare", "--engine", "llama.cpp", "--gguf", tmp.resolve("moe.gguf").toString());
        assertThat(r.code()).as(r.toString()).isEqualTo(2);
        assertThat(r.err()).contains(tmp.resolve("moe.gguf").toString()).contains("expert_count").contains("is not a GGUF of");
    }

    @Test
    void aPointTheGraphDoesNotEmitStopsTheFirstStepNamingTheGraphNamesLookedFor() {
        // as when a llama.cpp release renames a tensor: the reference wants a point no graph tensor gives
        var gguf = GgufCache.of(root.resolve("checkpoints/gemma4-tiny"), GgufOutputType.F32);
        try (var r = LlamaCppRunner.open(gguf, LlamaContext.Options.exact(256), p -> true)) {
            assertThatThrownBy(() -> r.step(new int[]{2, 651}, 0, List.of("layers.0.attn.q", "layers.6.attn.q")))
                    .isInstanceOf(LlamaCppException.class)
                    .hasMessageContaining("emitted no tensor for layers.6.attn.q (graph name Qcur_pos-6)")
                    .hasMessageContaining("update the table in GraphNames");
        }
    }

    @Test
    void badLlamaCppInputIsOneLineAndExit2() throws Exception {
        Path notGguf = Files.writeString(tmp.resolve("x.gguf"), "hello");
        var r = Cli.run("compare", "--engine", "llama.cpp", "--gguf", notGguf.toString());
        assertThat(r.code()).as(r.toString()).isEqualTo(2);
        assertThat(r.err()).contains(notGguf.toString()).contains("is not a GGUF file");
        var f = Cli.run("compare", "--engine", "llama.cpp", "--fault", "k-eq-v-rotated-keys");
        assertThat(f.code()).isEqualTo(2);
        assertThat(f.err()).contains("--fault").contains("does not apply to --engine llama.cpp");
        var e = Cli.run("compare", "--engine", "vllm");
        assertThat(e.code()).isEqualTo(2);
        assertThat(e.err()).contains("--engine must be decodiff or llama.cpp");
    }
}
