package dev.decodiff.tests;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * `--model FILE.gguf`: decodiff's engine runs a GGUF's own weights. A float32 GGUF of each bundled checkpoint holds its
 * weights exactly, so run from the GGUF (names, shapes and config rebuilt from the file) the engine must MATCH
 * transformers' reference of the checkpoint; a Q8_0 file's dump records its quantization.
 */
class GgufWeightsTest {
    static final ObjectMapper JSON = new ObjectMapper();
    static Path root;

    @TempDir
    static Path tmp;

    @BeforeAll
    static void home() {
        root = ReferenceCases.repoRoot();
        System.setProperty("decodiff.home", root.toString());
    }

    @Test
    void theEngineOnAFloatGgufOfEachCheckpointMatchesTransformers() throws Exception {
        for (String name : new String[]{"gemma4-tiny", "gemma4-tiny-ple", "gemma4-tiny-moe"}) {
            Path gguf = tmp.resolve(name + ".gguf");
            var c = Cli.run("gguf", "--model", root.resolve("checkpoints").resolve(name).toString(), "--out", gguf.toString());
            assertThat(c.code()).as(c.toString()).isZero();
            var r = Cli.run("compare", root.resolve("reference-dumps").resolve(name).resolve("long").toString(), "--model", gguf.toString(),
                    "--allow-mismatch", "--no-observer-check", "--json");
            assertThat(r.code()).as(r.toString()).isZero();
            var j = JSON.readTree(r.out());
            assertThat(j.get("verdict").asText()).as(name + ": " + j.get("verdict_text").asText()).isEqualTo("match");
            assertThat(j.get("only_in_reference")).isEmpty();
            // the folder it ran is not the checkpoint itself, and compare says so
            assertThat(j.get("notes").toString()).contains("--allow-mismatch");
        }
    }

    @Test
    void aDumpOfAQ8_0GgufRecordsItsMatrixTypes() throws Exception {
        Path gguf = tmp.resolve("q8.gguf");
        var c = Cli.run("gguf", "--model", root.resolve("checkpoints/gemma4-tiny").toString(), "--out", gguf.toString(), "--type", "q8_0");
        assertThat(c.code()).as(c.toString()).isZero();
        Path out = tmp.resolve("q8-dump");
        var d = Cli.run("dump", "--model", gguf.toString(), "--tokens", "2,367,965,414", "-n", "2", "--out", out.toString());
        assertThat(d.code()).as(d.toString()).isZero();
        var q = JSON.readTree(Files.readString(out.resolve("manifest.json"))).get("producer").get("quantization");
        assertThat(q.get("format").asText()).isEqualTo("gguf");
        assertThat(q.get("mode").asText()).isEqualTo("Q8_0");
        assertThat(q.get("overrides").get("Q8_0").asText()).isEqualTo("41 matrices");
    }
}
