package dev.decodiff.tests;

import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@code decodiff selfcheck} on Qwen3.5's recurrent caches: the exact engine passes every check (with the wrong reuse
 * caught at the state read), and each state hand-over fault fails at its state read, with no reference at all.
 * The expected cells come from the checkpoints' layer types (layer 0 is a linear-attention layer in both) and the
 * check's split (prefix reuse at 4/7 of the 70-token prompt: position 40).
 */
class RecurrentSelfCheckTest {
    private static final String PREFIX = "40";

    private static JsonNode selfcheck(int expectedExit, String... args) throws Exception {
        var all = new ArrayList<>(List.of("selfcheck", "--json"));
        all.addAll(List.of(args));
        var r = Cli.run(all.toArray(String[]::new));
        assertThat(r.code()).as(r.toString()).isEqualTo(expectedExit);
        return r.json();
    }

    private static JsonNode check(JsonNode report, String name) {
        for (var c : report.get("checks")) if (c.get("check").asText().equals(name)) return c;
        throw new AssertionError("no check " + name + " in " + report);
    }

    @ParameterizedTest
    @ValueSource(strings = {"checkpoints/qwen35-tiny", "checkpoints/qwen35-tiny-moe"})
    void theExactEnginePassesAndTheWrongReuseIsCaughtAtTheStateRead(String model) throws Exception {
        var report = selfcheck(0, "--model", ReferenceCases.repoRoot().resolve(model).toString());
        assertThat(report.get("verdict").asText()).isEqualTo("pass");
        for (String name : List.of("state-reads-match-writes", "decode-vs-prefill", "chunked-prefill-all", "chunked-prefill-3",
                "chunked-prefill-65", "snapshot-restore", "prefix-reuse"))
            assertThat(check(report, name).get("passed").asBoolean()).as(name).isTrue();
        // the wrong reuses pass only because they are caught, and where: the first position after the prefix, the state read
        assertThat(check(report, "wrong-reuse-without-state").get("detail").asText())
                .startsWith("caught at position " + PREFIX + ", layers.0.linear.conv_state_read");
        assertThat(check(report, "wrong-reuse-other-length").get("detail").asText())
                .startsWith("caught at position " + PREFIX + ", layers.0.linear.conv_state_read");
        // a restored snapshot continues bit for bit
        assertThat(check(report, "snapshot-restore").get("detail").asText()).endsWith("worst rel L2 0.00e+00");
    }

    /** Each hand-over fault fails the audit of state reads against writes, at the read of the step it first breaks. */
    @ParameterizedTest(name = "{0}")
    @CsvSource({
            "conv-state-not-carried, state-reads-match-writes, 1, layers.0.linear.conv_state_read",
            "state-not-carried,      state-reads-match-writes, 1, layers.0.linear.state_read",
            "state-stale,            state-reads-match-writes, 2, layers.0.linear.state_read",
            "prefix-reuse-without-state, prefix-reuse,         " + PREFIX + ", layers.0.linear.conv_state_read",
            // a kernel bug of the one-token path: the hand-over is intact, the first one-token step's kernel output is not
            "decode-decay-after-update, decode-vs-prefill,     1, layers.0.linear.core_out"})
    void handOverFaultsFailAtTheStateRead(String fault, String failing, int position, String point) throws Exception {
        var report = selfcheck(1, "--model", ReferenceCases.repoRoot().resolve("checkpoints/qwen35-tiny").toString(), "--fault", fault);
        var c = check(report, failing);
        assertThat(c.get("passed").asBoolean()).as(c.toString()).isFalse();
        assertThat(c.get("position").asInt()).as(c.toString()).isEqualTo(position);
        assertThat(c.get("point").asText()).as(c.toString()).isEqualTo(point);
        if (!fault.equals("decode-decay-after-update"))
            assertThat(check(report, "state-reads-match-writes").get("passed").asBoolean()).isEqualTo(fault.equals("prefix-reuse-without-state"));
    }

    /** A Gemma 4 fault on a Qwen3.5 checkpoint is refused in one line naming the owner and this catalog. */
    @Test
    void anotherArchitecturesFaultIsRefused() {
        var r = Cli.run("selfcheck", "--model", ReferenceCases.repoRoot().resolve("checkpoints/qwen35-tiny").toString(), "--fault", "ring-wrap");
        assertThat(r.code()).isEqualTo(2);
        assertThat(r.err().strip()).doesNotContain("\n").contains("--fault ring-wrap is a Gemma 4 fault").contains("state-not-carried");
        var g = Cli.run("compare", ReferenceCases.repoRoot().resolve("reference-dumps/gemma4-tiny/short").toString(), "--fault", "state-stale");
        assertThat(g.code()).isEqualTo(2);
        assertThat(g.err().strip()).doesNotContain("\n").contains("--fault state-stale is a Qwen3.5 fault");
    }
}
