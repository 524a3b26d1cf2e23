package dev.decodiff.tests;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.Fault;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.harness.arch.gemma4.sweep.Boundaries;
import dev.decodiff.harness.arch.gemma4.sweep.Boundary;
import dev.decodiff.harness.arch.gemma4.sweep.EngineScenarios;
import dev.decodiff.harness.arch.gemma4.sweep.Outcome;
import dev.decodiff.harness.arch.gemma4.sweep.Scenario;
import dev.decodiff.harness.arch.gemma4.sweep.ScenarioJson;
import dev.decodiff.harness.arch.gemma4.sweep.Sweep;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The cache-scenario sweep on decodiff's engine (gemma4-tiny, W = 8): clean, every family passes at every boundary
 * (cuts the ring cannot honour are refused); each cache-bookkeeping fault of the catalog fails a family at the boundary
 * its definition fixes, and is minimized to a smaller scenario whose first cell is where the fault lives.
 */
class SweepTest {
    static Gemma4Model model;
    static final Scenario.Settings F32 = new Scenario.Settings("f32", "f32", false, false, 0, 0, 0);

    @BeforeAll
    static void load() { model = Gemma4Model.load(ReferenceCases.repoRoot().resolve("checkpoints/gemma4-tiny")); }

    @AfterAll
    static void close() { model.close(); }

    static List<Boundary> boundaries() {
        int w = model.config().slidingWindow();
        return Boundaries.of(model.config(), List.of(2, w - 1, w + 1), 0, 3 * w + 2);
    }

    static Sweep.Result sweep(Set<Fault> faults, List<String> families, List<Scenario.Settings> settings) {
        var eng = new EngineScenarios(model, EngineOptions.defaults().withFaults(faults));
        return new Sweep(eng).run(settings, boundaries(), families, true, (d, t, w) -> {});
    }

    static Sweep.FamilyResult family(Sweep.Result r, String name) {
        return r.families().stream().filter(f -> f.family().equals(name)).findFirst().orElseThrow();
    }

    @Test
    void boundariesComeFromTheConfig() {
        var lengths = boundaries().stream().map(Boundary::length).toList();
        assertThat(lengths).contains(7, 8, 9, 16, 17, 24, 25).isSorted();
        assertThat(boundaries().stream().filter(b -> b.length() == 16).findFirst().orElseThrow().label()).isEqualTo("2·W");
    }

    @Test
    void theCleanEnginePassesEveryFamilyInEveryKvSetting() {
        var r = sweep(Set.of(), List.of(), List.of(F32, F32.withKv("q8_0", "q4_0")));
        for (var f : r.families())
            assertThat(f.firstFailure()).as("%s (%s): %s", f.family(), f.settings().describe(), f.firstFailure()).isNull();
        assertThat(r.passed()).isTrue();
        // a cut past what the ring holds is refused, and the report says it was by design
        var cut = family(r, "truncate-continue");
        assertThat(cut.outcomes()).anyMatch(a -> a.outcome() instanceof Outcome.Refused ref && ref.byDesign());
        assertThat(family(r, "snapshot-restore").outcomes()).allMatch(a -> a.outcome() instanceof Outcome.Pass);
        assertThat(family(r, "multi-sequence-batch").verdict()).isEqualTo("n/a");
    }

    @Test
    void ringWrapIsFoundAtWAndLocalizedToTheFirstSlidingLayersRead() {
        var r = sweep(Set.of(Fault.RING_WRAP), List.of("prefill-vs-decode"), List.of(F32));
        var f = family(r, "prefill-vs-decode");
        assertThat(f.failingBoundary().length()).isEqualTo(8);
        var m = f.minimized();
        assertThat(m.outcome().point()).isEqualTo("layers.0.attn.k_read");
        assertThat(m.outcome().kind()).isEqualTo("kv rule: read = written");
        assertThat(m.outcome().detail()).contains("position 8's row holds position 0's");
        // one position shorter the wrapped slot is never read: the boundary is already the smallest
        assertThat(m.scenario().boundary().length()).isEqualTo(8);
        assertThat(m.scenario().size()).isLessThanOrEqualTo(f.failing().size());
    }

    @Test
    void aWindowOneTooWideBreaksTheMaskRuleAtTheFirstPositionPastTheWindow() {
        var r = sweep(Set.of(Fault.SLIDING_WINDOW_OFF_BY_ONE), List.of("prefill-vs-decode"), List.of(F32));
        var f = family(r, "prefill-vs-decode");
        assertThat(f.failingBoundary().label()).isEqualTo("W−1");
        assertThat(f.minimized().outcome().kind()).isEqualTo("kv rule: read window = mask");
        assertThat(f.minimized().outcome().position()).isEqualTo(8);
        assertThat(f.minimized().outcome().point()).isEqualTo("layers.0.attn.k_read");
    }

    @Test
    void aStaleRestorePositionFailsColdEqualsWarmAndShrinksToOneToken() {
        // a sweep minimizes its first failure only: one family per sweep
        for (var name : List.of("snapshot-restore", "prefix-copy")) {
            var r = sweep(Set.of(Fault.PREFIX_REUSE_STALE_POSITION), List.of(name), List.of(F32));
            var m = family(r, name).minimized();
            assertThat(m.scenario().boundary().length()).as(name).isEqualTo(1);
            assertThat(m.outcome().point()).as(name).isEqualTo("layers.0.attn.q");
            assertThat(m.outcome().position()).as(name).isEqualTo(1);
        }
    }

    @Test
    void aSlidingRingCutSilentlyIsAFindingBelowTheWindow() {
        var r = sweep(Set.of(Fault.SLIDING_TRUNCATE), List.of("truncate-continue"), List.of(F32));
        var f = family(r, "truncate-continue");
        assertThat(f.failingBoundary().label()).isEqualTo("W−1");
        // shrunk below the boundary: a prefix of W−2 cut from W+1 is the first the ring cannot honour
        assertThat(f.minimized().scenario().boundary().length()).isEqualTo(6);
        assertThat(f.minimized().scenario().undefinedWhy()).contains("sliding ring of 8 slots");
        assertThat(f.minimized().outcome().point()).isEqualTo("layers.0.attn.k_read");
    }

    @Test
    void anEngineThatThrowsFailsAtItsStep() {
        var r = sweep(Set.of(Fault.CACHE_DROPS_FIRST_POSITION), List.of("prefill-vs-decode"), List.of(F32));
        var fail = family(r, "prefill-vs-decode").firstFailure();
        assertThat(fail.kind()).isEqualTo("engine threw");
        assertThat(fail.detail()).contains("position 0 is no longer in the cache");
    }

    @Test
    void aScenarioFileRoundTripsAndBadInputNamesTheFix() throws Exception {
        var sc = dev.decodiff.harness.arch.gemma4.sweep.Families.all(model.config()).stream().filter(f -> f.name().equals("prefix-copy")).findFirst().orElseThrow();
        var s = sc.builder().build(sc, model.config(), new Boundary(9, "W+1", "test"), F32, false);
        Path dir = Files.createTempDirectory("sweep");
        ScenarioJson.save(s, dir.resolve("s.json"));
        var back = ScenarioJson.read(dir.resolve("s.json"), model.config());
        assertThat(back.schedules()).isEqualTo(s.schedules());
        assertThat(back.stream(1)).isEqualTo(s.stream(1));
        Files.writeString(dir.resolve("bad.json"), new ObjectMapper().writeValueAsString(java.util.Map.of("sequences", java.util.Map.of("0", java.util.Map.of("length", 4)),
                "schedules", List.of(List.of(java.util.Map.of("op", "feed", "seq", 0, "n", 2)), List.of(java.util.Map.of("op", "rewind", "seq", 0))))));
        var r = Cli.run("sweep", "--scenario", dir.resolve("bad.json").toString());
        assertThat(r.code()).isEqualTo(2);
        assertThat(r.err()).contains("bad.json").contains("unknown op \"rewind\"").contains("docs/scenarios.md");
    }

    @Test
    void theCliSweepsAndWritesARepro() throws Exception {
        Path dir = Files.createTempDirectory("repro");
        var r = Cli.run("sweep", "--fault", "ring-wrap", "--kv-cache", "f32", "--family", "prefill-vs-decode", "--repro", dir.toString());
        assertThat(r.code()).as(r.toString()).isEqualTo(1);
        assertThat(r.out()).contains("FAIL prefill-vs-decode").contains("at 8 (W)").contains("layers.0.attn.k_read");
        assertThat(dir.resolve("scenario.json")).exists();
        var cell = new ObjectMapper().readTree(dir.resolve("cell.json").toFile());
        assertThat(cell.get("point").asText()).isEqualTo("layers.0.attn.k_read");
        assertThat(Files.readString(dir.resolve("README.md"))).contains("config.json sha256");
        var again = Cli.run("sweep", "--scenario", dir.resolve("scenario.json").toString(), "--fault", "ring-wrap");
        assertThat(again.code()).as(again.toString()).isEqualTo(1);
        var clean = Cli.run("sweep", "--scenario", dir.resolve("scenario.json").toString());
        assertThat(clean.code()).as(clean.toString()).isZero();
    }
}
