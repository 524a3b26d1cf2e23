package dev.decodiff.tests;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.llamacpp.ffi.LlamaCppHome;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * `bisect --engine llama.cpp`: every op of llama.cpp fed transformers' own inputs and cache history through the eval
 * callback, so each cell carries only its local error. Clean llama.cpp has none over one fp16 step — its fp16 GELU
 * table leaves a few 1e-4 on the MLP outputs, under the floor — where compare's first divergence is layers.0.mlp.out;
 * llama.cpp with a porting bug after that first MLP (porting-bugs/01 in a k_eq_v layer's value path, 04 in the MoE
 * router; built natively, skipped without the native build) is bisected to the cell manifest.tsv names, and one whose
 * op bisect's detectors can recompute (07, v_norm missing) is named by the same variant as on decodiff's engine.
 */
class LlamaCppBisectTest {
    static final ObjectMapper JSON = new ObjectMapper();
    static Path root;

    @BeforeAll
    static void setUp() {
        root = LlamaCppSetUp.repoRootAsHome();
    }

    @Test
    void cleanLlamaCppHasNoLocalErrorOverOneFp16StepAndItsGeluTableShowsUnderIt() throws Exception {
        var r = Cli.run("bisect", root.resolve("reference-dumps/gemma4-tiny/long").toString(), "--engine", "llama.cpp", "--json");
        assertThat(r.code()).as(r.toString()).isZero();
        var j = JSON.readTree(r.out());
        assertThat(j.get("verdict").asText()).isEqualTo("match");
        assertThat(j.get("culprit").isNull()).isTrue();
        // GELU through fp16: input and output rounded, relative 2^-11 per element at most
        assertThat(j.get("worst_below_floor").get("mlp.out").asDouble()).isBetween(1e-4, 0x1p-10);
        assertThat(j.get("worst_below_floor").get("attn.q").asDouble()).isLessThan(1e-5);
    }

    @Test
    void portingBugsAfterTheFirstMlpAreBisectedToTheirOwnCells() throws Exception {
        var cached = Exec.run(root, List.of(root.resolve("scripts/llamacpp-native.sh").toString(), "--cached"));
        Assumptions.assumeTrue(cached.code() == 0, "llama.cpp's native build is not made: run scripts/llamacpp-native.sh once (about 10 minutes)");
        var expected = new java.util.HashMap<String, String>();
        for (String line : Files.readAllLines(root.resolve("llamacpp/porting-bugs/manifest.tsv")))
            if (!line.isBlank() && !line.startsWith("#")) expected.put(line.split("\t")[0], line.split("\t")[2] + " " + line.split("\t")[3]);
        for (var c : List.of(new String[]{"01-k-eq-v-value-after-rope", "gemma4-tiny"}, new String[]{"04-moe-router-unscaled", "gemma4-tiny-moe"},
                new String[]{"07-value-norm-missing", "gemma4-tiny"})) {
            var bug = Exec.run(root, List.of(root.resolve("scripts/llamacpp-native.sh").toString(), "--patch",
                    root.resolve("llamacpp/porting-bugs/" + c[0] + ".patch").toString()));
            assertThat(bug.code()).as(bug.err()).isZero();
            var java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
            var r = Exec.run(root, List.of(java, "--add-modules", "jdk.incubator.vector", "--enable-native-access=ALL-UNNAMED",
                    "-D" + LlamaCppHome.PROPERTY + "=" + bug.out().strip(), "-Ddecodiff.home=" + root, "-cp", System.getProperty("java.class.path"),
                    "dev.decodiff.harness.cli.Main", "bisect", root.resolve("reference-dumps/" + c[1] + "/long").toString(), "--engine", "llama.cpp", "--json"));
            assertThat(r.code()).as(r.err()).isEqualTo(1);
            JsonNode culprit = JSON.readTree(r.out()).get("culprit");
            assertThat(culprit.get("step").asInt() + " " + culprit.get("point").asText()).as(c[0]).isEqualTo(expected.get(c[0]));
            // the variant decodiff's own bisect names for its v-norm-missing fault names this one too
            if (c[0].startsWith("07-")) assertThat(culprit.get("variant").get("name").asText()).as(c[0]).isEqualTo("v_norm absent");
        }
    }
}
