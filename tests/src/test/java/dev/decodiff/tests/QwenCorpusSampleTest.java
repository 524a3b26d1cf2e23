package dev.decodiff.tests;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIf;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The committed sample of the Qwen3.5 foreign-candidate corpus (docs/corpus.md, "Qwen3.5"): random tiny Qwen3.5
 * checkpoints, transformers as the third-party engine. Each run's verdict class, as scripts/corpus-rates.py judges
 * the whole corpus: dump to dump with the checkpoint at hand ({@code compare REF CAND --model CKPT --json}), or — a
 * reference made with a porting bug — the reference against decodiff's own engine, live ({@code compare REF --model
 * CKPT --json}). A clean candidate must pass (exit 0, match or precision); a bug in the candidate must be a divergence
 * (exit 1); a bug in the reference must not pass (exit ≠ 0, neither match nor precision).
 *
 * <p>Runs once the sample is committed (scripts/qwen-corpus-sample.py picks it from a built corpus).
 */
@EnabledIf("sampleExists")
class QwenCorpusSampleTest {
    static final String SAMPLE = "tests/src/test/resources/qwen-corpus-sample";

    static boolean sampleExists() { return Files.isRegularFile(ReferenceCases.repoRoot().resolve(SAMPLE).resolve("corpus.json")); }

    @BeforeAll
    static void home() {
        System.setProperty("decodiff.home", ReferenceCases.repoRoot().toString());
    }

    record Run(String id, String expected, String bug, String precision, Path checkpoint, Path reference, Path candidate) {
        @Override
        public String toString() { return id + " (" + expected + ", " + precision + (bug == null ? "" : ", " + bug) + ")"; }
    }

    static List<Run> runs() throws IOException {
        Path dir = ReferenceCases.repoRoot().resolve(SAMPLE);
        JsonNode doc = new ObjectMapper().readTree(dir.resolve("corpus.json").toFile());
        List<Run> out = new ArrayList<>();
        for (JsonNode e : doc.get("runs")) {
            JsonNode cand = e.get("candidate");
            out.add(new Run(e.get("id").asText(), e.get("expected").asText(), e.get("bug").isNull() ? null : e.get("bug").asText(),
                    e.get("precision").asText(), dir.resolve(e.get("checkpoint").asText()).normalize(),
                    dir.resolve(e.get("reference").asText()).normalize(),
                    cand == null || cand.isNull() ? null : dir.resolve(cand.asText()).normalize()));
        }
        return out;
    }

    @Test
    void theSampleHoldsEveryVerdictClass() throws IOException {
        var runs = runs();
        assertThat(runs).extracting(Run::expected).contains("clean", "bug", "reference-bug");
        assertThat(runs).extracting(Run::precision).contains("bf16-cpu", "fp16-cpu");
        for (var r : runs) {
            assertThat(r.checkpoint().resolve("config.json")).as(r.toString()).isRegularFile();
            assertThat(r.reference().resolve("manifest.json")).as(r.toString()).isRegularFile();
            if (r.candidate() != null) assertThat(r.candidate().resolve("manifest.json")).as(r.toString()).isRegularFile();
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("runs")
    void eachSampleRunGetsItsVerdictClass(Run run) throws Exception {
        var r = run.candidate() == null
                ? Cli.run("compare", run.reference().toString(), "--model", run.checkpoint().toString(), "--json")
                : Cli.run("compare", run.reference().toString(), run.candidate().toString(), "--model", run.checkpoint().toString(), "--json");
        String verdict = r.out().startsWith("{") ? r.json().get("verdict").asText() : "(no JSON)";
        boolean passed = r.code() == 0 && (verdict.equals("match") || verdict.equals("precision"));
        switch (run.expected()) {
            case "clean" -> assertThat(passed).as("a clean candidate must pass: " + run + "\n" + r).isTrue();
            case "bug" -> {
                assertThat(r.code()).as("a bug in the candidate is a divergence: " + run + "\n" + r).isEqualTo(1);
                assertThat(verdict).as(run.toString()).isEqualTo("divergence");
            }
            case "reference-bug" -> {
                assertThat(r.code()).as("a bug in the reference must not pass: " + run + "\n" + r).isNotZero();
                assertThat(verdict).as(run.toString()).isNotIn("match", "precision");
            }
            default -> throw new AssertionError("unknown expected class " + run.expected());
        }
    }
}
