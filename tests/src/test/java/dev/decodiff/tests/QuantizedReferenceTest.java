package dev.decodiff.tests;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.harness.cli.Main;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * decodiff on an MLX-quantized checkpoint against transformers on the same weights dequantized (by NumPy, on the
 * device: checkpoints/make_mlx_checkpoints.py references): MATCH at the fp32 tolerances, step by step and layer by
 * layer — the MoE one with its experts in mlx-lm's SwitchGLU layout (gate_proj, up_proj, down_proj stacks, 4-bit)
 * that the script fuses back into Hugging Face's gate_up_proj for transformers. A dump of a quantized checkpoint records its quantization; float weights against a quantized reference
 * are a different model and refused unless --allow-mismatch.
 */
class QuantizedReferenceTest {
    static final ObjectMapper JSON = new ObjectMapper();
    static Path root;

    @TempDir
    static Path tmp;

    @BeforeAll
    static void home() {
        root = ReferenceCases.repoRoot();
        System.setProperty("decodiff.home", root.toString());
    }

    static List<Path> quantizedCases() {
        var cases = ReferenceCases.fp32Cases().stream().filter(p -> p.getParent().getFileName().toString().contains("-mlx")).toList();
        assertThat(cases).extracting(p -> p.getParent().getFileName() + "/" + p.getFileName()).containsExactly(
                "gemma4-tiny-mlx4/long", "gemma4-tiny-mlx4/short", "gemma4-tiny-mlx8/long", "gemma4-tiny-mlx8/short",
                "gemma4-tiny-moe-mlx4/long", "gemma4-tiny-moe-mlx4/short", "gemma4-tiny-ple-mlx4/long", "gemma4-tiny-ple-mlx4/short");
        return cases;
    }


    @ParameterizedTest(name = "{0}")
    @MethodSource("quantizedCases")
    void theQuantizedCheckpointMatchesTransformersOnItsDequantizedWeights(Path caseDir) throws Exception {
        var r = Cli.run("compare", caseDir.toString(), "--json", "--no-observer-check");
        assertThat(r.code()).as(r.toString()).isZero();
        var j = r.json();
        assertThat(j.get("verdict").asText()).as(j.get("verdict_text").asText()).isEqualTo("match");
        assertThat(j.get("only_in_reference")).isEmpty();
        assertThat(j.get("tolerance_profile").asText()).isEqualTo("built-in fp32 defaults");
        assertThat(j.get("cells").asInt()).isGreaterThan(300);
        // the live run is on the MLX checkpoint itself, found by the reference's hashes
        assertThat(j.get("candidate").asText()).contains(root.resolve("checkpoints").resolve(caseDir.getParent().getFileName()).toString());
        var ref = j.get("producers").get("reference");
        var cand = j.get("producers").get("candidate");
        assertThat(ref.get("name").asText()).isEqualTo("transformers");
        assertThat(ref.get("quantization").get("format").asText()).isEqualTo("mlx");
        assertThat(cand.get("quantization")).isEqualTo(ref.get("quantization"));
    }

    @Test
    void aDumpOfAQuantizedCheckpointRecordsItsBitsGroupSizeAndOverrides() throws Exception {
        for (String name : new String[]{"gemma4-tiny-mlx4", "gemma4-tiny-mlx8"}) {
            Path ck = root.resolve("checkpoints").resolve(name), out = tmp.resolve("dump-" + name);
            var r = Cli.run("dump", "--model", ck.toString(), "--prompt", "The garden was quiet", "-n", "2", "--out", out.toString());
            assertThat(r.code()).as(r.toString()).isZero();
            var q = JSON.readTree(Files.readString(out.resolve("manifest.json"))).get("producer").get("quantization");
            var declared = JSON.readTree(ck.resolve("config.json").toFile()).get("quantization");
            assertThat(q.get("format").asText()).isEqualTo("mlx");
            assertThat(q.get("mode").asText()).isEqualTo(declared.get("mode").asText());
            assertThat(q.get("bits").asInt()).isEqualTo(declared.get("bits").asInt());
            assertThat(q.get("group_size").asInt()).isEqualTo(declared.get("group_size").asInt());
            int overrides = 0;
            for (var it = declared.fields(); it.hasNext(); ) {
                var e = it.next();
                if (!e.getValue().isObject()) continue;
                overrides++;
                assertThat(q.get("overrides").get(e.getKey()).asText())
                        .isEqualTo(e.getValue().get("bits").asInt() + "-bit, group " + e.getValue().get("group_size").asInt());
            }
            assertThat(q.get("overrides").size()).isEqualTo(overrides).isEqualTo(1);
            var i = Cli.run("inspect", out.toString());
            assertThat(i.code()).as(i.toString()).isZero();
        }
        // a float checkpoint's dump records none
        Path plain = tmp.resolve("dump-plain");
        var r = Cli.run("dump", "--model", root.resolve("checkpoints/gemma4-tiny").toString(), "--prompt", "The garden was quiet", "-n", "2", "--out", plain.toString());
        assertThat(r.code()).as(r.toString()).isZero();
        assertThat(JSON.readTree(Files.readString(plain.resolve("manifest.json"))).get("producer").has("quantization")).isFalse();
    }

    @Test
    void floatWeightsAgainstAQuantizedReferenceAreADifferentModel() throws Exception {
        Path ref = root.resolve("reference-dumps/gemma4-tiny-mlx4/long");
        Path floatModel = root.resolve("checkpoints/gemma4-tiny");
        var r = Cli.run("compare", ref.toString(), "--model", floatModel.toString());
        assertThat(r.code()).as(r.toString()).isEqualTo(Main.BAD_INPUT);
        assertThat(r.err().strip().lines().count()).isEqualTo(1);
        assertThat(r.err()).contains("runs float (unquantized) weights, but the reference", "ran MLX affine 4-bit, group 64", "a different model", "--allow-mismatch");

        // allowed: compared, and the quantization is far above the fp32 noise floor from the embedding on
        var a = Cli.run("compare", ref.toString(), "--model", floatModel.toString(), "--allow-mismatch", "--no-observer-check");
        assertThat(a.code()).as(a.toString()).isEqualTo(Main.DIVERGENCE);
        assertThat(a.out()).contains("weights    reference MLX affine 4-bit, group 64", "candidate float (unquantized) weights")
                .contains("First divergent step: step 0");

        // dump against dump: a decodiff dump of the float checkpoint teacher-forced on the reference
        Path cand = tmp.resolve("float-on-quantized-ref");
        var d = Cli.run("dump", "--model", floatModel.toString(), "--reference", ref.toString(), "--allow-mismatch", "--out", cand.toString());
        assertThat(d.code()).as(d.toString()).isZero();
        var c = Cli.run("compare", ref.toString(), cand.toString());
        assertThat(c.code()).as(c.toString()).isEqualTo(Main.BAD_INPUT);
        assertThat(c.err()).contains("ran float (unquantized) weights but the reference", "ran MLX affine 4-bit", "a different model");
        assertThat(c.err().strip().lines().count()).isEqualTo(1);

        // the matching quantized checkpoint prints its weights once, for both sides
        var m = Cli.run("compare", ref.toString(), "--no-observer-check");
        assertThat(m.code()).as(m.toString()).isZero();
        assertThat(m.out()).contains("weights    MLX affine 4-bit, group 64, 1 override (language_model.model.layers.0.mlp.down_proj: 8-bit, group 64) weights on both sides");
    }
}
