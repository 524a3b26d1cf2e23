package dev.decodiff.tests;

import dev.decodiff.harness.cli.Main;
import dev.decodiff.llamacpp.gguf.GgufFile;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.nio.file.Path;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * decodiff on the bundled Q4_K_M GGUFs (made by llama.cpp's own quantizer) against transformers on the same blocks
 * dequantized by llama.cpp's gguf-py (reference-dumps/make_gguf_dumps.py, on the device): MATCH at the fp32
 * tolerances, every step and layer, the run found by the reference's hashes or named by --model FILE.gguf. Float
 * weights against such a reference are another model, refused unless --allow-mismatch.
 */
class GgufReferenceTest {
    static Path root;

    @BeforeAll
    static void home() {
        root = ReferenceCases.repoRoot();
        System.setProperty("decodiff.home", root.toString());
    }

    static List<Path> ggufCases() {
        var cases = ReferenceCases.fp32Cases().stream().filter(p -> p.getParent().getFileName().toString().endsWith(ReferenceCases.GGUF_SUFFIX)).toList();
        assertThat(cases).extracting(p -> p.getParent().getFileName() + "/" + p.getFileName()).containsExactly(
                "gemma4-tiny-moe-q4_k_m/long", "gemma4-tiny-moe-q4_k_m/short", "gemma4-tiny-ple-e2b-q4_k_m/long",
                "gemma4-tiny-ple-e2b-q4_k_m/short", "gemma4-tiny-q4_k_m/long", "gemma4-tiny-q4_k_m/short");
        return cases;
    }


    @ParameterizedTest(name = "{0}")
    @MethodSource("ggufCases")
    void theQ4_KGgufMatchesTransformersOnItsDequantizedWeights(Path caseDir) throws Exception {
        Path gguf = ReferenceCases.ggufOf(caseDir);
        // the reference's matrix types are those of the file: K-quants where rows hold a super-block, Q5_0 where not
        var types = dev.decodiff.llamacpp.gguf.GgufToCheckpoint.matrixTypes(GgufFile.read(gguf));
        assertThat(types).containsKeys("Q4_K", "Q6_K", "Q5_0", "Q8_0");
        for (var explicit : new boolean[]{false, true}) {
            var args = new java.util.ArrayList<>(List.of("compare", caseDir.toString(), "--json", "--no-observer-check"));
            if (explicit) args.addAll(List.of("--model", gguf.toString()));
            var r = Cli.run(args.toArray(String[]::new));
            assertThat(r.code()).as(r.toString()).isZero();
            var j = r.json();
            assertThat(j.get("verdict").asText()).as(j.get("verdict_text").asText()).isEqualTo("match");
            assertThat(j.get("only_in_reference")).isEmpty();
            assertThat(j.get("tolerance_profile").asText()).isEqualTo("built-in fp32 defaults");
            assertThat(j.get("cells").asInt()).isGreaterThan(400);
            assertThat(j.get("notes").toString()).doesNotContain("--allow-mismatch");
            // the live run is on the folder decodiff makes of the GGUF
            assertThat(j.get("candidate").asText()).contains("gguf-checkpoints");
            var ref = j.get("producers").get("reference");
            var cand = j.get("producers").get("candidate");
            assertThat(ref.get("name").asText()).isEqualTo("transformers");
            assertThat(ref.get("quantization").get("format").asText()).isEqualTo("gguf");
            types.forEach((t, n) -> assertThat(ref.get("quantization").get("overrides").get(t).asText()).isEqualTo(n + " matrices"));
            assertThat(cand.get("quantization")).isEqualTo(ref.get("quantization"));
        }
    }

    @Test
    void floatWeightsAgainstAQ4_KReferenceAreADifferentModel() throws Exception {
        Path ref = root.resolve("reference-dumps/gemma4-tiny-q4_k_m/long");
        Path floatModel = root.resolve("checkpoints/gemma4-tiny");
        var r = Cli.run("compare", ref.toString(), "--model", floatModel.toString());
        assertThat(r.code()).as(r.toString()).isEqualTo(Main.BAD_INPUT);
        assertThat(r.err().strip().lines().count()).isEqualTo(1);
        assertThat(r.err()).contains("runs float (unquantized) weights, but the reference", "Q4_K", "a different model", "--allow-mismatch");

        // allowed: compared, and 4-5 bit weights are far above the fp32 noise floor from the first layer on
        var a = Cli.run("compare", ref.toString(), "--model", floatModel.toString(), "--allow-mismatch", "--no-observer-check", "--no-attribution");
        assertThat(a.code()).as(a.toString()).isEqualTo(Main.DIVERGENCE);
        assertThat(a.out()).contains("First divergent step: step 0").contains("candidate float (unquantized) weights");

        // and the Q4_K file against the float reference (which states no quantization): another checkpoint
        var q = Cli.run("compare", root.resolve("reference-dumps/gemma4-tiny/long").toString(), "--model",
                ReferenceCases.ggufOf(ref).toString());
        assertThat(q.code()).as(q.toString()).isEqualTo(Main.BAD_INPUT);
        assertThat(q.err().strip().lines().count()).isEqualTo(1);
        assertThat(q.err()).contains("differs from the reference's checkpoint", "--allow-mismatch");
    }
}
