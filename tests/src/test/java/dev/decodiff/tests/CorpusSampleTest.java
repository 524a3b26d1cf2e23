package dev.decodiff.tests;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The committed samples of the foreign-candidate corpora (docs/corpus.md), Gemma 4's and Qwen3.5's: each run's verdict
 * class, compared dump to dump with its checkpoint at hand ({@code compare REF CAND --model CKPT --json}), or a
 * reference against decodiff's live engine where the run names no candidate, as scripts/corpus-rates.py does for the
 * whole corpus. A clean candidate must pass (exit 0, match or precision); a bug in the candidate must be a divergence
 * (exit 1); a bug in the reference must not pass (exit ≠ 0, neither match nor precision).
 */
class CorpusSampleTest {
    static final List<String> SAMPLES = List.of("corpus-sample", "qwen-corpus-sample");

    @BeforeAll
    static void home() {
        System.setProperty("decodiff.home", ReferenceCases.repoRoot().toString());
    }

    /** @param candidate null: the reference against decodiff's own engine, live */
    record Run(String sample, String id, String expected, String bug, Path checkpoint, Path reference, Path candidate) {
        @Override
        public String toString() { return sample + " " + id + " (" + expected + (bug == null ? "" : ", " + bug) + (candidate == null ? ", live" : "") + ")"; }
    }

    static List<Run> runs() throws IOException {
        List<Run> out = new ArrayList<>();
        for (String sample : SAMPLES) {
            Path dir = ReferenceCases.repoRoot().resolve("tests/src/test/resources").resolve(sample);
            JsonNode doc = new ObjectMapper().readTree(dir.resolve("corpus.json").toFile());
            for (JsonNode e : doc.get("runs")) {
                JsonNode cand = e.get("candidate");
                out.add(new Run(sample, e.get("id").asText(), e.get("expected").asText(),
                        e.get("bug").isNull() ? null : e.get("bug").asText(),
                        dir.resolve(e.get("checkpoint").asText()).normalize(),
                        dir.resolve(e.get("reference").asText()).normalize(),
                        cand == null || cand.isNull() ? null : dir.resolve(cand.asText()).normalize()));
            }
        }
        return out;
    }

    @Test
    void eachSampleHoldsEveryVerdictClass() throws IOException {
        var runs = runs();
        for (String sample : SAMPLES)
            assertThat(runs).filteredOn(r -> r.sample().equals(sample)).as(sample)
                    .extracting(Run::expected).contains("clean", "bug", "reference-bug");
        for (var r : runs) {
            assertThat(r.checkpoint().resolve("config.json")).as(r.toString()).isRegularFile();
            assertThat(r.reference().resolve("manifest.json")).as(r.toString()).isRegularFile();
            if (r.candidate() != null) assertThat(r.candidate().resolve("manifest.json")).as(r.toString()).isRegularFile();
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("runs")
    void eachSampleRunGetsItsVerdictClass(Run run) throws Exception {
        assertThat(Files.isDirectory(run.reference())).as(run.toString()).isTrue();
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
