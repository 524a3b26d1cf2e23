package dev.decodiff.harness.bench;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.harness.cli.Main;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static dev.decodiff.harness.cli.CliTest.run;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@code bench --compare-time N}: a live compare run as a user runs it (its own JVM, observer check on), its time split
 * into parts. Bad option combinations are refused before anything is synthesized; a real run on a narrow model reports
 * every part a live compare has, in --json, and the observer check's verdict.
 */
class CompareTimeTest {
    /** The small preset, narrowed further: seconds to synthesize, dump and compare. */
    private static final String TINY = "small,hidden=64,ffn=64,vocab=512,head_dim=16,global_head_dim=32,layers=2";

    @Test
    void badOptionsAreOneLineErrorsBeforeAnyWork(@TempDir Path cache) throws Exception {
        for (var args : List.of(List.of("--compare-time", "0"), List.of("--compare-time", "-3"), List.of("--compare-time", "8", "--compare-rss", "8"),
                List.of("--keep-reference"), List.of("--compare-time", "8", "--core"), List.of("--compare-time", "8", "--against", "llama.cpp"))) {
            var all = new ArrayList<>(List.of("bench", "--size", TINY, "--cache", cache.toString()));
            all.addAll(args);
            var r = run(all.toArray(String[]::new));
            assertThat(r.code()).as(args + ": " + r.err()).isEqualTo(Main.BAD_INPUT);
            assertThat(r.err()).as(args.toString()).hasLineCount(1).doesNotContain("synthesizing");
        }
        var notANumber = run("bench", "--size", TINY, "--cache", cache.toString(), "--compare-time", "many");
        assertThat(notANumber.code()).isEqualTo(Main.BAD_INPUT);
        assertThat(notANumber.err()).contains("--compare-time");
        try (var s = Files.list(cache)) {
            assertThat(s.toList()).isEmpty();
        }
    }

    @Test
    void aLiveCompareReportsItsPartsAndTheObserverCheck(@TempDir Path cache) throws Exception {
        var r = run("bench", "--size", TINY, "--cache", cache.toString(), "--compare-time", "12", "--json");
        assertThat(r.code()).as(r.err()).isZero();
        var j = new ObjectMapper().readTree(r.out());
        assertThat(j.get("compare_prompt_tokens").asInt()).isEqualTo(12);
        assertThat(j.get("compare_observer_check").asBoolean()).isTrue();
        assertThat(j.get("compare_observer_effect").asText()).isEqualTo("none");
        var c = j.get("compare");
        double wall = c.get("wall_s").asDouble(), parts = 0;
        assertThat(wall).isPositive();
        assertThat(c.get("cpu_s").asDouble()).isPositive();
        var names = new ArrayList<String>();
        c.get("parts").properties().forEach(e -> names.add(e.getKey()));
        assertThat(names).contains("checkpoint_identity", "load", "prefill", "decode", "reference_reads", "staging", "compare", "attribution", "observer_check", "report", "other");
        for (var e : c.get("parts").properties()) {
            assertThat(e.getValue().get("wall_s").asDouble()).as(e.getKey()).isGreaterThanOrEqualTo(0);
            assertThat(e.getValue().get("cpu_s").asDouble()).as(e.getKey()).isGreaterThanOrEqualTo(0);
            parts += e.getValue().get("wall_s").asDouble();
        }
        // the parts split the command's time: together no more than the run, and most of it
        assertThat(parts).isLessThanOrEqualTo(wall * 1.001).isGreaterThan(wall * 0.5);
        assertThat(j.has("dump")).isTrue(); // made here, not kept
        try (var s = Files.list(cache)) {
            assertThat(s.map(p -> p.getFileName().toString()).toList()).noneMatch(n -> n.contains("compare-rss"));
        }
    }
}
