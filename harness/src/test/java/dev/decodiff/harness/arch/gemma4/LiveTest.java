package dev.decodiff.harness.arch.gemma4;

import dev.decodiff.harness.live.TinyCase;
import dev.decodiff.harness.live.ModelLocator;
import dev.decodiff.harness.live.ObserverCheck;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.harness.TinyCheckpoint;
import dev.decodiff.harness.compare.Comparison;
import dev.decodiff.harness.dump.DumpReader;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;

import static dev.decodiff.harness.cli.CliTest.run;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The live path on a Java-made tiny checkpoint: dump from the engine, compare live against it (teacher-forced,
 * observer effect checked), a catalog fault located by the CLI, run --ids, inspect, the bundled-model lookup.
 */
class LiveTest {
    @TempDir
    static Path home;
    static Path model, dump;
    static String oldHome;

    @BeforeAll
    static void setUp() {
        var c = TinyCase.write(home, home.resolve("reference-dumps/tiny/case"), 6);
        model = c.model();
        dump = c.dump();
        oldHome = System.getProperty("decodiff.home");
        System.setProperty("decodiff.home", home.toString());
    }

    @AfterAll
    static void tearDown() {
        if (oldHome == null) System.clearProperty("decodiff.home");
        else System.setProperty("decodiff.home", oldHome);
    }

    @Test
    void dumpFromTheEngineIsAValidDumpWithEveryPoint() {
        var d = DumpReader.open(dump);
        var m = d.manifest();
        assertThat(m.stepCount()).isEqualTo(6);
        assertThat(m.promptLength()).isEqualTo(7);
        assertThat(m.tokens()).hasSize(7 + 6);
        assertThat(m.model().modelType()).isEqualTo("gemma4_text");
        assertThat(m.model().numHiddenLayers()).isEqualTo(3);
        assertThat(m.model().configSha256()).isEqualTo(ModelLocator.identity(model).configSha256());
        assertThat(d.allPoints()).contains("embed", "layers.0.attn.q", "layers.0.attn.v_read", "layers.2.attn.k_read",
                "layers.2.out", "final_norm", "logits");
        for (int s = 0; s < m.stepCount(); s++) assertThat(m.step(s).nextToken()).isEqualTo(m.tokens().get(7 + s));
        try (var st = d.readStep(3)) {
            // sliding window 4: the sliding layer reads 4 positions, the full layer all 7+3 = 10
            assertThat(st.tensor("layers.0.attn.k_read").shape()).containsExactly(4, 1, 8);
            assertThat(st.tensor("layers.2.attn.v_read").shape()).containsExactly(10, 1, 16);
        }
    }

    @Test
    void liveCompareAgainstItsOwnDumpMatchesWithNoObserverEffect() throws Exception {
        var r = run("compare", dump.toString(), "--model", model.toString(), "--json");
        assertThat(r.code()).as(r.out() + r.err()).isZero();
        var j = new ObjectMapper().readTree(r.out());
        assertThat(j.get("verdict").asText()).isEqualTo("match");
        assertThat(j.get("observer_effect").asText()).isEqualTo("none");
        assertThat(j.get("worst_by_kind").get("logits").get("rel_l2").asDouble()).isLessThan(1e-6); // same engine
        // without --model: the bundled checkpoint whose hashes match (home/checkpoints/tiny)
        var b = run("compare", dump.toString());
        assertThat(b.code()).as(b.out() + b.err()).isZero();
        assertThat(b.out()).contains("live engine: " + model);
    }

    @Test
    void aCatalogFaultIsLocatedLive() throws Exception {
        var r = run("compare", dump.toString(), "--fault", "k-eq-v-rotated-keys", "--json");
        assertThat(r.code()).as(r.out() + r.err()).isEqualTo(1);
        var fd = new ObjectMapper().readTree(r.out()).get("first_divergence");
        assertThat(fd.get("step").asInt()).isEqualTo(1);
        assertThat(fd.get("point").asText()).isEqualTo("layers.2.attn.v_read");
        // "bit-identical" or "equal": the engine's float reductions may round differently once the JIT has warmed up
        assertThat(fd.get("diagnosis").asText())
                .matches("at positions 0–6 the candidate's layers.2.attn.v_read is (bit-identical to|equal \\(rel L2 ≤ [0-9.e+-]+\\) to) the reference's layers.2.attn.k_read"
                        + " \\(its other rows are right\\): the values read back from the cache are the keys \\(the cache hands back keys as values\\)");
        var w = run("compare", dump.toString(), "--fault", "sliding-window-off-by-one", "--json");
        assertThat(w.code()).isEqualTo(1);
        var wd = new ObjectMapper().readTree(w.out()).get("first_divergence");
        assertThat(wd.get("point").asText()).isEqualTo("layers.0.attn.k_read");
    }

    @Test
    void observerEffectIsReportedWhenAProbeChangesTheLogits() {
        try (var m = Gemma4Model.load(model)) {
            var ref = DumpReader.open(dump);
            var src = new LiveCandidate(m, EngineOptions.defaults(), ref.manifest(), p -> true, true);
            var r = Comparison.run(ref, src, Comparison.Options.defaults());
            assertThat(r.observerEffect()).isEqualTo("none");
            var unchecked = Comparison.run(ref, new LiveCandidate(m, EngineOptions.defaults(), ref.manifest(), p -> true, false),
                    Comparison.Options.defaults());
            assertThat(unchecked.observerEffect()).isEqualTo("not_checked");
            assertThat(unchecked.matches()).isTrue();
            assertThat(ObserverCheck.observerDifference(4, new float[]{1f, 2f}, new float[]{1f, 2.5f}))
                    .contains("step 4").contains("1 of 2 values");
        }
    }

    @Test
    void runPrintsTheGreedyIdsOfTheDump() {
        var m = DumpReader.open(dump).manifest();
        var r = run("run", "--model", model.toString(), "--tokens", "2,5,9,13,17,21,25", "-n", "6", "--ids");
        assertThat(r.code()).as(r.err()).isZero();
        String expected = String.join(",", m.tokens().subList(7, 13).stream().map(String::valueOf).toList());
        assertThat(r.out().strip()).isEqualTo(expected);
        var bad = run("run", "--model", model.toString(), "--tokens", "2,5,999", "--ids");
        assertThat(bad.code()).isEqualTo(2);
        assertThat(bad.err()).contains("999");
        var noTok = run("run", "--model", model.toString(), "--tokens", "2,5");
        assertThat(noTok.code()).isEqualTo(2);
        assertThat(noTok.err()).contains("tokenizer.json");
    }

    @Test
    void dumpTeacherForcedWithAPointFilter() {
        Path out = home.resolve("filtered");
        var r = run("dump", "--model", model.toString(), "--reference", dump.toString(), "--points", "layers.2.*,logits", "-n", "3",
                "--out", out.toString());
        assertThat(r.code()).as(r.err()).isZero();
        var d = DumpReader.open(out);
        assertThat(d.stepCount()).isEqualTo(3);
        assertThat(d.allPoints()).allMatch(p -> p.startsWith("layers.2.") || p.equals("logits"));
        assertThat(d.allPoints()).contains("layers.2.attn.v_read", "logits");
        var c = run("compare", dump.toString(), out.toString());
        // 3 of the reference's 6 steps: within tolerance, but not a match
        assertThat(c.code()).as(c.out() + c.err()).isEqualTo(dev.decodiff.harness.cli.Main.INCOMPLETE);
        assertThat(c.out()).contains("only in the reference").contains("the candidate has 3 of the reference's 6 steps");
    }

    @Test
    void inspectACheckpoint() {
        var r = run("inspect", model.toString());
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).contains("3 layers").contains("full").contains("sliding").contains("yes").contains("F32")
                .contains("config     sha256 " + ModelLocator.identity(model).configSha256());
    }

    @Test
    void liveModelFromAnotherCheckpointIsBadInput() {
        Path other = TinyCheckpoint.write(home.resolve("other"));
        try {
            java.nio.file.Files.writeString(other.resolve("config.json"),
                    java.nio.file.Files.readString(other.resolve("config.json")).replace("30.0", "20.0"));
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
        var r = run("compare", dump.toString(), "--model", other.toString());
        assertThat(r.code()).isEqualTo(2);
        assertThat(r.err().strip().lines().toList()).hasSize(1);
        assertThat(r.err()).contains(other.toString()).contains("--allow-mismatch");
        var allowed = run("compare", dump.toString(), "--model", other.toString(), "--allow-mismatch", "--json");
        assertThat(allowed.code()).isIn(0, 1);
        assertThat(allowed.out()).contains("--allow-mismatch");
    }

}
