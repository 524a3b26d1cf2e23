package dev.decodiff.harness.arch.gemma4;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.engine.KvType;
import dev.decodiff.engine.Probe;
import dev.decodiff.harness.TinyCheckpoint;
import dev.decodiff.harness.compare.Comparison;
import dev.decodiff.harness.compare.ComparisonResult;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.live.ObserverCheck;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.StringJoiner;

import static dev.decodiff.harness.cli.CliTest.run;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The observer check on a prompt longer than {@link LiveCandidate#REPLAYED}: the probe-free session re-runs only the
 * prompt's last positions, resumed from the probed pass's state. A probe that writes a value into the forward (a
 * replacement one ulp-scale nudge away, far inside every tolerance, so only the observer check can see it) must be
 * caught there and in a decode step; one confined to an early position is the documented gap, which the whole
 * re-run closes.
 */
class ObserverCheckTest {
    static final int PROMPT = ObserverCheck.REPLAYED + 44;

    @TempDir
    static Path home;
    static Path model, dump;

    @BeforeAll
    static void setUp() {
        model = TinyCheckpoint.write(home.resolve("tiny"));
        var ids = new StringJoiner(",");
        for (int i = 0; i < PROMPT; i++) ids.add(Integer.toString((7 * i + 3) % TinyCheckpoint.V));
        dump = home.resolve("long");
        var r = run("dump", "--model", model.toString(), "--tokens", ids.toString(), "-n", "3", "--out", dump.toString());
        assertThat(r.code()).as(r.err()).isZero();
    }

    /**
     * Hands every call on to the candidate's probe, then changes one value of {@code point} at {@code row} of {@code step}:
     * by 16 ulps ({@code by} 0), or by {@code by} times its magnitude (at least 1).
     */
    static final class Planted implements Probe {
        private final Probe inner;
        private final int step, row;
        private final String point;
        private final float by;
        private int current;

        Planted(Probe inner, int step, String point, int row, float by) {
            this.inner = inner;
            this.by = by;
            this.step = step;
            this.point = point;
            this.row = row;
        }

        @Override public boolean wants(String p) { return inner.wants(p) || p.equals(point); }

        @Override
        public void beginStep(int s, int start, int length) {
            current = s;
            inner.beginStep(s, start, length);
        }

        @Override
        public float[] capture(String p, int[] shape, float[] data) {
            if (inner.wants(p)) inner.capture(p, shape, data);
            if (current != step || !p.equals(point)) return null;
            float[] changed = data.clone(); // the capture above keeps what the engine computed
            int width = data.length / shape[0];
            float x = changed[row * width];
            changed[row * width] = by == 0 ? x + 16 * Math.ulp(x) : x + by * Math.max(1f, Math.abs(x)); // 16 ulps: far inside every tolerance
            return changed;
        }

        @Override public void endStep(int s, float[] logits, int greedy) { inner.endStep(s, logits, greedy); }
    }

    private static ComparisonResult compare(EngineOptions options, ObserverCheck check, int step, String point, int row) {
        return compare(options, check, step, point, row, 0);
    }

    private static ComparisonResult compare(EngineOptions options, ObserverCheck check, int step, String point, int row, float by) {
        try (var m = Gemma4Model.load(model)) {
            var ref = DumpReader.open(dump);
            try (var live = new LiveCandidate(m, options, ref.manifest(), ref.allPoints()::contains, check,
                    p -> row < 0 ? p : new Planted(p, step, point, row, by))) {
                return Comparison.run(ref, live, Comparison.Options.defaults());
            }
        }
    }

    @Test
    void withoutAChangeTheCheckPassesAndSaysWhichPositionsItReran() {
        var r = compare(EngineOptions.defaults(), ObserverCheck.LAST_POSITIONS, 0, "", -1);
        assertThat(r.matches()).isTrue();
        assertThat(r.observerEffect()).isEqualTo("none");
        assertThat(r.notes()).anyMatch(n -> n.contains("step 0's last 256 of 300 positions")
                && n.contains("positions 0–43") && n.contains("--full-observer-check"));
        var whole = compare(EngineOptions.defaults(), ObserverCheck.WHOLE, 0, "", -1);
        assertThat(whole.observerEffect()).isEqualTo("none");
        assertThat(whole.notes()).noneMatch(n -> n.contains("observer check re-ran"));
    }

    @Test
    void aProbeThatChangesAValueOfTheLastPositionsIsCaught() {
        for (String point : new String[]{"layers.0.attn.q", "layers.1.out", "layers.2.attn.v_read", "final_norm"}) {
            // a read window's first row is an early position, read by the last one only (one weight of 300: changed by more)
            boolean read = point.endsWith("_read");
            var r = compare(EngineOptions.defaults(), ObserverCheck.LAST_POSITIONS, 0, point, read ? 0 : PROMPT - 1, read ? 1e-3f : 0);
            assertThat(r.observerEffect()).as(point).startsWith("logits with probes differ from logits without at step 0");
            // every cell within tolerance: only the observer check sees it, and it fails the verdict
            assertThat(r.firstDivergence()).as(point).isNull();
            assertThat(r.exitCode()).as(point).isEqualTo(ComparisonResult.EXIT_DIVERGENCE);
        }
        var lastRowsStart = compare(EngineOptions.defaults(), ObserverCheck.LAST_POSITIONS, 0, "layers.0.out", PROMPT - ObserverCheck.REPLAYED, 1e-3f);
        assertThat(lastRowsStart.observerEffect()).startsWith("logits with probes differ from logits without at step 0");
    }

    @Test
    void aProbeThatChangesAValueOfADecodeStepIsCaught() {
        for (String point : new String[]{"layers.1.attn.k", "layers.2.attn.k_read", "logits"}) {
            boolean read = point.endsWith("_read"); // position 0's key as step 2 reads it back from the cache
            var r = compare(EngineOptions.defaults(), ObserverCheck.LAST_POSITIONS, 2, point, 0, read ? 1e-3f : 0);
            assertThat(r.observerEffect()).as(point).startsWith("logits with probes differ from logits without at step 2");
        }
    }

    /** The documented gap: a change confined to a position before the re-run ones reaches both sessions alike. */
    @Test
    void aChangeOfAnEarlierPositionIsCaughtOnlyByTheWholeReRun() {
        int early = PROMPT - ObserverCheck.REPLAYED - 1;
        float by = 1e-3f;
        var lastOnly = compare(EngineOptions.defaults(), ObserverCheck.LAST_POSITIONS, 0, "layers.0.out", early, by);
        assertThat(lastOnly.observerEffect()).isEqualTo("none");
        var whole = compare(EngineOptions.defaults(), ObserverCheck.WHOLE, 0, "layers.0.out", early, by);
        assertThat(whole.observerEffect()).startsWith("logits with probes differ from logits without at step 0");
        // an encoded cache cannot resume with the one pass's bits: the whole step is re-run there too
        var bf16 = compare(EngineOptions.defaults().withKvTypes(KvType.BF16, KvType.BF16), ObserverCheck.LAST_POSITIONS, 0, "layers.0.out", early, by);
        assertThat(bf16.observerEffect()).startsWith("logits with probes differ from logits without at step 0");
        assertThat(bf16.notes()).noneMatch(n -> n.contains("observer check re-ran"));
    }

    @Test
    void theCliRunsTheCheckOnTheLastPositionsUnlessToldToReRunEverything() throws Exception {
        var r = run("compare", dump.toString(), "--model", model.toString(), "--json");
        assertThat(r.code()).as(r.out() + r.err()).isZero();
        var j = new ObjectMapper().readTree(r.out());
        assertThat(j.get("observer_effect").asText()).isEqualTo("none");
        assertThat(j.get("notes").toString()).contains("observer check re-ran without probes step 0's last 256 of 300 positions");
        var full = run("compare", dump.toString(), "--model", model.toString(), "--json", "--full-observer-check");
        assertThat(full.code()).as(full.out() + full.err()).isZero();
        assertThat(new ObjectMapper().readTree(full.out()).get("notes").toString()).doesNotContain("observer check re-ran");
        var both = run("compare", dump.toString(), "--model", model.toString(), "--no-observer-check", "--full-observer-check");
        assertThat(both.code()).isEqualTo(2);
        assertThat(both.err()).contains("--no-observer-check and --full-observer-check").hasLineCount(1);
    }
}
