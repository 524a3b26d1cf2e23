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
 * The committed sample of the foreign-candidate corpus (docs/corpus.md): each run's verdict class, compared dump to
 * dump with its checkpoint at hand ({@code compare REF CAND --model CKPT --json}), as scripts/corpus-rates.py does for
 * the whole corpus. A clean candidate must pass (exit 0, match or precision); a bug in the candidate must be a
 * divergence (exit 1); a bug in the reference must not pass (exit ≠ 0, neither match nor precision).
 */
class CorpusSampleTest {
    static Path root, sample;

    @BeforeAll
    static void home() {
        root = ReferenceCases.repoRoot();
        System.setProperty("decodiff.home", root.toString());
        sample = root.resolve("tests/src/test/resources/corpus-sample");
    }

    record Run(String id, String expected, String bug, Path checkpoint, Path reference, Path candidate) {
        @Override
        public String toString() { return id + " (" + expected + (bug == null ? "" : ", " + bug) + ")"; }
    }

    static List<Run> runs() throws IOException {
        Path dir = ReferenceCases.repoRoot().resolve("tests/src/test/resources/corpus-sample");
        JsonNode doc = new ObjectMapper().readTree(dir.resolve("corpus.json").toFile());
        List<Run> out = new ArrayList<>();
        for (JsonNode e : doc.get("runs")) {
            out.add(new Run(e.get("id").asText(), e.get("expected").asText(),
                    e.get("bug").isNull() ? null : e.get("bug").asText(),
                    dir.resolve(e.get("checkpoint").asText()).normalize(),
                    dir.resolve(e.get("reference").asText()).normalize(),
                    dir.resolve(e.get("candidate").asText()).normalize()));
        }
        return out;
    }

    @Test
    void theSampleHoldsEveryVerdictClass() throws IOException {
        var runs = runs();
        assertThat(runs).extracting(Run::expected).contains("clean", "bug", "reference-bug");
        for (var r : runs) {
            assertThat(r.checkpoint().resolve("config.json")).as(r.toString()).isRegularFile();
            assertThat(r.reference().resolve("manifest.json")).as(r.toString()).isRegularFile();
            assertThat(r.candidate().resolve("manifest.json")).as(r.toString()).isRegularFile();
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("runs")
    void eachSampleRunGetsItsVerdictClass(Run run) throws Exception {
        assertThat(Files.isDirectory(run.reference())).as(run.toString()).isTrue();
        var r = Cli.run("compare", run.reference().toString(), run.candidate().toString(),
                "--model", run.checkpoint().toString(), "--json");
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
