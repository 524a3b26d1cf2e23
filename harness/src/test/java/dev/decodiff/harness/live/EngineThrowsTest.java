package dev.decodiff.harness.live;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.harness.compare.EngineFailure;
import dev.decodiff.harness.dump.DumpReader;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.CompletionException;

import static dev.decodiff.harness.cli.CliTest.run;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * An engine that throws is a finding, not a crash: the catalog fault cache-drops-first-position makes every full
 * layer's cache disown position 0, so the first step that reads cache history (step 1, the first decode step of the
 * dump: its manifest feeds position 7 there) throws "position 0 is no longer in the cache". compare, bisect and
 * selfcheck must report that, with exit 1 and whatever was found before it.
 */
class EngineThrowsTest {
    static final ObjectMapper JSON = new ObjectMapper();
    @TempDir
    static Path home;
    static Path model, dump;

    @BeforeAll
    static void setUp() {
        var c = TinyCase.write(home, home.resolve("case"), 4);
        model = c.model();
        dump = c.dump();
        var m = DumpReader.open(dump).manifest();
        assertThat(m.step(1).start()).as("step 1 is the first to read the cache").isEqualTo(7);
    }

    @Test
    void compareEndsWithTheStepsBeforeTheThrowAndNamesTheException() throws Exception {
        Path html = home.resolve("threw.html");
        var r = run("compare", dump.toString(), "--model", model.toString(), "--fault", "cache-drops-first-position", "--json",
                "--html", html.toString());
        assertThat(r.code()).as(r.out() + r.err()).isEqualTo(1);
        assertThat(r.err()).doesNotContain("internal error");
        var j = JSON.readTree(r.out());
        assertThat(j.get("verdict").asText()).isEqualTo("divergence");
        assertThat(j.get("first_divergence").isNull()).as("step 0 is computed right").isTrue();
        var f = j.get("engine_failure");
        assertThat(f.get("step").asInt()).isEqualTo(1);
        assertThat(f.get("exception").asText()).isEqualTo("IllegalStateException");
        assertThat(f.get("message").asText()).isEqualTo("position 0 is no longer in the cache");
        assertThat(f.get("frames")).isNotEmpty();
        assertThat(f.get("frames").get(0).asText()).contains("InferenceSession");
        assertThat(j.get("steps").get("compared").asInt()).isEqualTo(1);
        assertThat(j.get("cells").asInt()).as("step 0's cells are kept").isPositive();
        assertThat(j.get("verdict_text").asText()).contains("the engine threw at step 1").contains("position 0 is no longer in the cache");
        assertThat(Files.readString(html)).contains("The engine threw at step 1").contains("position 0 is no longer in the cache");

        var t = run("compare", dump.toString(), "--model", model.toString(), "--fault", "cache-drops-first-position");
        assertThat(t.code()).isEqualTo(1);
        assertThat(t.out()).contains("The engine threw at step 1").contains("IllegalStateException: position 0 is no longer in the cache")
                .contains("    at InferenceSession").contains("DIVERGENCE");
    }

    @Test
    void aDivergenceFoundBeforeTheThrowIsKept() throws Exception {
        var r = run("compare", dump.toString(), "--model", model.toString(), "--fault", "v-norm-missing", "--fault",
                "cache-drops-first-position", "--json");
        assertThat(r.code()).as(r.out() + r.err()).isEqualTo(1);
        var j = JSON.readTree(r.out());
        assertThat(j.get("first_divergence").get("step").asInt()).isZero();
        assertThat(j.get("first_divergence").get("point").asText()).isEqualTo("layers.0.attn.v");
        assertThat(j.get("engine_failure").get("step").asInt()).isEqualTo(1);
        assertThat(j.get("verdict_text").asText()).contains("Then the engine threw at step 1");
    }

    @Test
    void bisectReportsTheThrowAsItsFinding() throws Exception {
        var r = run("bisect", dump.toString(), "--model", model.toString(), "--fault", "cache-drops-first-position", "--json", "--no-ops");
        assertThat(r.code()).as(r.out() + r.err()).isEqualTo(1);
        var j = JSON.readTree(r.out());
        assertThat(j.get("verdict").asText()).isEqualTo("engine_threw");
        assertThat(j.get("engine_failure").get("step").asInt()).isEqualTo(1);
        assertThat(j.get("conclusion").asText()).contains("the engine threw at step 1").contains("position 0 is no longer in the cache");
        var t = run("bisect", dump.toString(), "--model", model.toString(), "--fault", "cache-drops-first-position", "--no-ops");
        assertThat(t.code()).isEqualTo(1);
        assertThat(t.out()).contains("DIVERGENCE").doesNotContain("MATCH");
    }

    @Test
    void selfcheckFailsTheChecksTheEngineCannotFinish() throws Exception {
        var r = run("selfcheck", "--model", model.toString(), "--fault", "cache-drops-first-position", "--json");
        assertThat(r.code()).as(r.out() + r.err()).isEqualTo(1);
        var j = JSON.readTree(r.out());
        assertThat(j.get("verdict").asText()).isEqualTo("fail");
        boolean named = false;
        for (var c : j.get("checks"))
            if (!c.get("passed").asBoolean() && c.get("detail").asText().contains("the engine threw: IllegalStateException: position 0 is no longer in the cache"))
                named = true;
        assertThat(named).as(r.out()).isTrue();
    }

    @Test
    void dumpKeepsTheStepsBeforeTheThrowAndLeavesNoHalfWrittenStep() throws Exception {
        Path out = home.resolve("threw-dump");
        var r = run("dump", "--model", model.toString(), "--tokens", "2,5,9,13", "-n", "3", "--fault", "cache-drops-first-position",
                "--out", out.toString());
        assertThat(r.code()).as(r.out() + r.err()).isEqualTo(1);
        assertThat(r.err().strip().lines()).as(r.err()).hasSize(1);
        assertThat(r.err()).contains("the engine threw at step 1: IllegalStateException: position 0 is no longer in the cache")
                .contains("keeps the 1 step before it");
        try (var files = Files.list(out)) {
            assertThat(files.map(f -> f.getFileName().toString()).sorted().toList()).containsExactly("manifest.json", "step-0000.safetensors");
        }
        assertThat(DumpReader.open(out).stepCount()).isEqualTo(1);
    }

    @Test
    void aWorkerThreadsWrapperIsSeenThrough() {
        var cause = new IllegalStateException("position 3 is no longer in the cache");
        var f = EngineFailure.of(2, new CompletionException(cause));
        assertThat(f.exception()).isEqualTo("IllegalStateException");
        assertThat(f.message()).isEqualTo("position 3 is no longer in the cache");
        assertThat(f.frames()).hasSizeLessThanOrEqualTo(EngineFailure.FRAMES).first().asString().contains("EngineThrowsTest");
        assertThat(f.sentence()).startsWith("the engine threw at step 2: IllegalStateException: position 3 is no longer in the cache (at ");
    }
}
