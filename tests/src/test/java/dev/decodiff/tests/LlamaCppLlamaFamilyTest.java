package dev.decodiff.tests;

import com.fasterxml.jackson.databind.JsonNode;
import dev.decodiff.llamacpp.gguf.GgufFile;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * llama.cpp on the Llama family (llama-tiny: llama with llama3 RoPE scaling, GQA, attention and MLP biases, its own
 * lm_head; qwen3-tiny: qwen3 with q/k norms and a tied head), against transformers' own float32 references: the GGUF
 * decodiff converts (llama's q/k head permutation, rope_freqs) run by llama.cpp's own llama/qwen3 graphs agrees with
 * transformers in every cell, every capture point kind compared; in bf16 it is at most a precision effect; bisect
 * finds no op of llama.cpp's with a local error, every point written back into its graph; and selfcheck's
 * reference-free paths agree.
 */
class LlamaCppLlamaFamilyTest {
    /** fp32 against fp32: ggml's own kernels and RoPE (its own cos/sin, freq factors) stay within this of transformers. */
    static final double WORST_REL_L2 = 1e-5;
    static Path root;

    @BeforeAll
    static void setUp() {
        root = LlamaCppSetUp.repoRootAsHome();
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"llama-tiny/short", "llama-tiny/continuation", "qwen3-tiny/short", "qwen3-tiny/continuation"})
    void f32LlamaCppMatchesTransformersAtEveryPoint(String refCase) throws Exception {
        var r = Cli.run("compare", root.resolve("reference-dumps/" + refCase).toString(), "--engine", "llama.cpp", "--json");
        assertThat(r.code()).as(r.toString()).isZero();
        var j = r.json();
        assertThat(j.get("verdict").asText()).as(j.get("verdict_text").asText()).isEqualTo("match");
        assertThat(j.get("observer_effect").asText()).isEqualTo("none");
        assertThat(j.get("only_in_reference")).as("every reference point is captured from llama.cpp's graph").isEmpty();
        // embed, q, k, v, k_read, v_read, attn.out, mlp.out, out, final_norm, logits
        assertThat(j.get("worst_by_kind").size()).isEqualTo(11);
        var worst = new ArrayList<JsonNode>();
        j.get("worst_by_kind").forEach(worst::add);
        var max = worst.stream().max(Comparator.comparingDouble(c -> c.get("rel_l2").asDouble())).orElseThrow();
        System.out.printf("llama.cpp %s: worst cell %s at step %d: rel L2 %.3e%n", refCase, max.get("point").asText(),
                max.get("step").asInt(), max.get("rel_l2").asDouble());
        assertThat(max.get("rel_l2").asDouble()).as("worst cell %s", max).isLessThanOrEqualTo(WORST_REL_L2);
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"llama-tiny/short", "qwen3-tiny/short"})
    void bf16LlamaCppIsAtMostAPrecisionEffect(String refCase) throws Exception {
        var r = Cli.run("compare", root.resolve("reference-dumps/" + refCase).toString(), "--engine", "llama.cpp", "--gguf-type", "bf16", "--json");
        assertThat(r.code()).as(r.toString()).isZero();
        var j = r.json();
        assertThat(j.get("verdict").asText()).as(j.get("verdict_text").asText()).isIn("match", "precision");
        // bf16 weights do change the numbers: the cells are not fp32-exact, so the run really used the bf16 file
        var worst = new ArrayList<JsonNode>();
        j.get("worst_by_kind").forEach(worst::add);
        assertThat(worst.stream().mapToDouble(c -> c.get("rel_l2").asDouble()).max().orElseThrow()).isGreaterThan(1e-4);
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"llama-tiny/short", "qwen3-tiny/continuation"})
    void bisectFindsNoLocalErrorAndWritesEveryPointBack(String refCase) throws Exception {
        var r = Cli.run("bisect", root.resolve("reference-dumps/" + refCase).toString(), "--engine", "llama.cpp", "--json");
        assertThat(r.code()).as(r.toString()).isZero();
        var j = r.json();
        assertThat(j.get("verdict").asText()).isEqualTo("match");
        assertThat(j.get("culprit").isNull()).isTrue();
        // the local errors, each op fed the reference's inputs (q and k written back in llama.cpp's head order), are
        // fp32 noise: a point written in the wrong layout would leave its consumers far off
        var local = j.get("worst_below_floor");
        assertThat(local.size()).isEqualTo(11);
        local.fields().forEachRemaining(e -> assertThat(e.getValue().asDouble()).as(e.getKey()).isLessThan(1e-5));
    }

    /** Reference-free: decode vs prefill, chunked prefill and capture vs none agree on llama.cpp's run. */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"llama-tiny", "qwen3-tiny"})
    void selfcheckPassesItsDenseChecks(String checkpoint) throws Exception {
        var r = Cli.run("selfcheck", "--engine", "llama.cpp", "--model", root.resolve("checkpoints/" + checkpoint).toString(), "--json");
        assertThat(r.code()).as(r.toString()).isZero();
        var names = new ArrayList<String>();
        r.json().get("checks").forEach(c -> {
            names.add(c.get("check").asText());
            assertThat(c.get("passed").asBoolean()).as(c.toString()).isTrue();
        });
        assertThat(names).containsExactly("decode-vs-prefill", "chunked-prefill-3", "chunked-prefill-7", "instrumented-vs-plain");
    }

    /** A GGUF of another Llama-family model is refused with the hyperparameters that differ, before llama.cpp runs it. */
    @org.junit.jupiter.api.Test
    void aGgufOfAnotherModelIsRefused(@TempDir Path tmp) throws Exception {
        Path other = tmp.resolve("qwen3.gguf");
        assertThat(Cli.run("gguf", "--model", root.resolve("checkpoints/qwen3-tiny").toString(), "--out", other.toString()).code()).isZero();
        var r = Cli.run("compare", root.resolve("reference-dumps/llama-tiny/short").toString(), "--engine", "llama.cpp", "--gguf", other.toString());
        assertThat(r.code()).as(r.toString()).isEqualTo(2);
        assertThat(r.toString()).contains("architecture qwen3≠llama").contains("block_count 2≠3");
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource({"llama-tiny, llama, true", "qwen3-tiny, qwen3, false"})
    void ggufConvertsTheCheckpoint(String checkpoint, String arch, boolean ropeFreqs, @TempDir Path tmp) throws Exception {
        Path out = tmp.resolve(checkpoint + ".gguf");
        var r = Cli.run("gguf", "--model", root.resolve("checkpoints/" + checkpoint).toString(), "--out", out.toString());
        assertThat(r.code()).as(r.toString()).isZero();
        var g = GgufFile.read(out);
        assertThat(g.metadata().get("general.architecture").asString()).isEqualTo(arch);
        var names = g.tensors().stream().map(t -> t.name()).toList();
        assertThat(names.contains("rope_freqs.weight")).as("llama3 RoPE scaling as rope_freqs").isEqualTo(ropeFreqs);
        // llama-tiny has its own lm_head; qwen3-tiny ties it to the embedding, which llama.cpp then reuses
        assertThat(names.contains("output.weight")).isEqualTo(arch.equals("llama"));
    }
}
