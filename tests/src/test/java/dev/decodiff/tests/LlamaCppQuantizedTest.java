package dev.decodiff.tests;

import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.file.Path;
import java.util.ArrayList;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * llama.cpp (the library itself) on a quantized GGUF against decodiff's reference of the same weights: what is left
 * is llama.cpp's own arithmetic, and attribution must name it with no cell unexplained. ggml quantizes each matmul's
 * input to its weights' vec-dot type — q8_K blocks of 256 for the K-quants (ffn_down, the full layers' attn_output),
 * q8_0 blocks of 32 for the Q5_0 / Q8_0 matrices the quantizer falls back to on 128-wide rows — and GELU goes through
 * its fp16 table. A hypothesis that quantized every input to q8_0 leaves the K-quant matrices' cells unexplained.
 */
class LlamaCppQuantizedTest {
    static Path root;

    @TempDir
    Path tmp;

    @BeforeAll
    static void setUp() {
        root = LlamaCppSetUp.repoRootAsHome();
    }


    /** The verdict's attributed cells: all exact or precision; returns the explanations of the precision ones, by point kind. */
    static java.util.Map<String, java.util.Set<String>> assertEveryCellExplained(JsonNode j) {
        assertThat(j.get("verdict").asText()).as(j.get("verdict_text").asText()).isEqualTo("precision");
        var cells = j.get("attribution").get("cells");
        assertThat(cells.size()).as("every compared cell is attributed").isEqualTo(j.get("cells").asInt());
        var byKind = new java.util.TreeMap<String, java.util.Set<String>>();
        for (var c : cells) {
            assertThat(c.get("status").asText()).as(c.toString()).isIn("exact", "precision");
            if (c.get("status").asText().equals("precision")) {
                String p = c.get("point").asText();
                byKind.computeIfAbsent(p.replaceFirst("^layers\\.\\d+\\.", ""), k -> new java.util.TreeSet<>()).add(c.get("explanation").asText());
            }
        }
        return byKind;
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"gemma4-tiny", "gemma4-tiny-moe", "gemma4-tiny-ple-e2b"})
    void llamaCppOnTheQ4_KGgufIsPrecisionWithItsVecDotInputsAndGeluTableNamed(String ck) throws Exception {
        Path ref = root.resolve("reference-dumps/" + ck + "-q4_k_m/long");
        Path gguf = ReferenceCases.ggufOf(ref);
        var r = Cli.run("compare", ref.toString(), "--engine", "llama.cpp", "--gguf", gguf.toString(), "--json");
        assertThat(r.code()).as(r.toString()).isZero();
        var j = r.json();
        assertThat(j.get("tokens").get("flip").asInt()).isZero();
        var byKind = assertEveryCellExplained(j);
        var names = new ArrayList<String>();
        for (var e : j.get("attribution").get("precision_effects")) names.add(e.get("explanation").asText());
        assertThat(names).anyMatch(n -> n.startsWith("matmul inputs quantized to the weights' vec-dot blocks"));
        // the MLP output (its down_proj a K-quant: q8_K inputs) is reproduced with the GELU table, the projections by
        // their inputs' q8_0 blocks
        assertThat(byKind.get("mlp.out")).isNotEmpty().allMatch(e -> e.contains("vec-dot") && e.contains("GELU through an fp16 table"));
        assertThat(byKind.get("attn.q")).isNotEmpty().allMatch(e -> e.contains("vec-dot"));
        if (ck.contains("moe")) assertThat(byKind.get("moe.out")).isNotEmpty().allMatch(e -> e.contains("vec-dot"));
        // the effect is what quantization of the inputs adds: 1e-3 … 5e-2 at an op, far above fp32 noise
        for (var c : j.get("attribution").get("cells"))
            if (c.get("point").asText().equals("layers.0.mlp.out") && c.get("step").asInt() == 0)
                assertThat(c.get("local_rel_l2").asDouble()).isBetween(1e-3, 5e-2);
    }

    /**
     * Qwen3.5 through llama_model_quantize (Q4_K_M) and decodiff's q8_0: the tiny checkpoints' rows of 48 hold no whole
     * 256-value super-block, nor a whole 32-value block, so llama.cpp's quantizer falls back to F16 for every
     * hidden-wide matrix and to Q5_0 / Q5_1 / Q8_0 only where rows are 32-multiples (ssm_out, attn_output). A Q5_1
     * matrix takes q8_1 inputs, whose fp16 block sums meet its minimums (without that term the MoE file's layer-3
     * attention output is off by 4e-4 and a near-tie routing decision after it goes the other way). llama.cpp
     * runs the file against the fp32 transformers reference: every cell over tolerance must be accounted for by ggml's
     * matmuls on the GGUF's own stored matrices (read back from the file, not quantized again), so the verdict is
     * precision with that effect named, and no cell is unexplained.
     */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"qwen35-tiny-llamacpp q4_k_m", "qwen35-tiny-moe-llamacpp q4_k_m", "qwen35-tiny-llamacpp q8_0", "qwen35-tiny-moe-llamacpp q8_0"})
    void aQuantizedQwen35GgufIsPrecisionWithTheStoredMatricesNamed(String spec) throws Exception {
        String ck = spec.split(" ")[0], type = spec.split(" ")[1];
        Path gguf = tmp.resolve(ck + "-" + type + ".gguf");
        var c = Cli.run("gguf", "--model", root.resolve("checkpoints/" + ck).toString(), "--out", gguf.toString(), "--type", type);
        assertThat(c.code()).as(c.toString()).isZero();
        var types = dev.decodiff.llamacpp.gguf.GgufToCheckpoint.matrixTypes(dev.decodiff.llamacpp.gguf.GgufFile.read(gguf));
        assertThat(types).containsKey("F16").doesNotContainKey("Q4_K");
        assertThat(types).containsKey(type.equals("q8_0") ? "Q8_0" : "Q5_0");
        var r = Cli.run("compare", root.resolve("reference-dumps/" + ck + "/long").toString(), "--engine", "llama.cpp", "--gguf", gguf.toString(), "--json");
        assertThat(r.code()).as(r.toString()).isZero();
        var j = r.json();
        assertThat(j.get("verdict").asText()).isEqualTo("precision");
        assertThat(j.get("observer_effect").asText()).isEqualTo("none");
        assertThat(j.get("only_in_reference")).as("every reference point is captured").isEmpty();
        int over = 0;
        for (var cell : j.get("attribution").get("cells")) {
            assertThat(cell.get("status").asText()).as(cell.toString()).isIn("exact", "precision");
            if (cell.get("status").asText().equals("precision")) {
                over++;
                assertThat(cell.get("explanation").asText()).as(cell.toString()).contains("GGUF's matrices as stored");
            }
        }
        assertThat(over).as("the rounded weights are seen").isPositive();
    }

    /**
     * Q4_0 (q8_0 inputs) and llama.cpp's Q4_K_S, whose fallback on 128-wide rows includes Q5_1: its q8_1 inputs carry
     * an fp16 block sum that meets the weights' minimum, which the hypothesis must model (without it attn.v of a
     * Q5_1 matrix is left at 5e-4, unexplained).
     */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"q4_0", "q4_k_s"})
    void aQuantizedGgufAgainstDecodiffsOwnReferenceOfItIsPrecisionToo(String type) throws Exception {
        Path gguf = tmp.resolve("tiny-" + type + ".gguf"), ref = tmp.resolve(type + "-ref");
        var c = Cli.run("gguf", "--model", root.resolve("checkpoints/gemma4-tiny").toString(), "--out", gguf.toString(), "--type", type);
        assertThat(c.code()).as(c.toString()).isZero();
        var types = dev.decodiff.llamacpp.gguf.GgufToCheckpoint.matrixTypes(dev.decodiff.llamacpp.gguf.GgufFile.read(gguf));
        if (type.equals("q4_k_s")) assertThat(types).containsKeys("Q4_K", "Q5_1", "Q5_0");
        var d = Cli.run("dump", "--model", gguf.toString(), "--tokens", "2,367,598,689,870,760,435,434,308,358,337", "-n", "6", "--out", ref.toString());
        assertThat(d.code()).as(d.toString()).isZero();
        var r = Cli.run("compare", ref.toString(), "--engine", "llama.cpp", "--gguf", gguf.toString(), "--model", gguf.toString(), "--json");
        assertThat(r.code()).as(r.toString()).isZero();
        var byKind = assertEveryCellExplained(r.json());
        assertThat(byKind.get("attn.q")).isNotEmpty().allMatch(e -> e.contains("vec-dot"));
        assertThat(byKind.get("attn.v")).isNotEmpty().allMatch(e -> e.contains("vec-dot"));
        // without --gguf llama.cpp runs the GGUF the reference's folder was made from, not a conversion of its floats
        var own = Cli.run("compare", ref.toString(), "--engine", "llama.cpp", "--model", gguf.toString(), "--json", "--no-attribution");
        assertThat(own.code()).as(own.toString()).isEqualTo(1);
        var oj = own.json();
        assertThat(oj.get("candidate").asText()).contains(gguf.toString()).doesNotContain("converted");
        assertThat(oj.get("first_divergence").get("rel_l2").asDouble()).as("the same divergence as with --gguf").isGreaterThan(1e-3);
        // moved away, it is not silently replaced by the folder's float weights
        Path folder = dev.decodiff.harness.llamacpp.GgufCheckpointCache.of(gguf);
        java.nio.file.Files.move(gguf, tmp.resolve("moved-" + type + ".gguf"));
        var gone = Cli.run("compare", ref.toString(), "--engine", "llama.cpp", "--model", folder.toString(), "--no-attribution");
        assertThat(gone.code()).as(gone.toString()).isEqualTo(dev.decodiff.harness.cli.Main.BAD_INPUT);
        assertThat(gone.err().strip().lines().count()).isEqualTo(1);
        assertThat(gone.err()).contains("was made from a GGUF", "--gguf FILE", "--gguf-type f32");
    }
}
