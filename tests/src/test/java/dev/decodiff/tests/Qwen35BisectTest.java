package dev.decodiff.tests;

import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * `decodiff bisect` on Qwen3.5, against transformers' references: the first divergent cell is named as the catalog
 * fault whose replay reproduces the candidate there (every other fault and the clean engine far from it), and proved by
 * writing the reference's tensor into the candidate engine: the culprit layer's output, where the candidate had it
 * wrong, comes back within tolerance. A clean engine is named nothing.
 */
class Qwen35BisectTest {
    static Path dumps;

    @TempDir
    Path tmp;

    @BeforeAll
    static void home() { dumps = ReferenceCases.repoRoot().resolve("reference-dumps"); }

    @ParameterizedTest(name = "{0} on {1}")
    @CsvSource({
            "state-stale, qwen35-tiny/long, 2, layers.0.linear.state_read",
            "conv-state-not-carried, qwen35-tiny-moe/short, 1, layers.0.linear.conv_state_read",
            "conv-state-dropped-on-continuation, qwen35-tiny/continuation, 6, layers.0.linear.conv_state_read",
            "state-kept-in-bf16, qwen35-tiny/long, 0, layers.0.linear.state",
            "decode-decay-after-update, qwen35-tiny/long, 1, layers.0.linear.core_out",
            "query-gate-split-halves, qwen35-tiny-moe/long, 0, layers.3.attn.q",
            "partial-rope-whole-head, qwen35-tiny/long, 0, layers.1.attn.q",
            "conv-taps-reversed, qwen35-tiny/long, 0, layers.0.linear.q",
    })
    void bisectNamesTheFaultAndProvesItBySubstitution(String fault, String ref, int step, String point) throws Exception {
        var r = Cli.run("bisect", dumps.resolve(ref).toString(), "--fault", fault, "--json");
        assertThat(r.code()).as(r.toString()).isEqualTo(1);
        var j = r.json();
        assertThat(j.at("/culprit/step").asInt()).as(r.toString()).isEqualTo(step);
        assertThat(j.at("/culprit/point").asText()).isEqualTo(point);
        assertThat(j.at("/variant/op").asText()).isEqualTo("catalog fault");
        assertThat(j.at("/variant/name").asText()).isEqualTo(fault);
        var naming = j.get("catalog_naming");
        assertThat(naming.get("named").asText()).isEqualTo(fault);
        // the named fault reproduces the candidate; every other fault tried, and the clean engine, is far from it
        JsonNode tried = naming.get("tried");
        assertThat(tried.get(0).get("fault").asText()).isEqualTo(fault);
        assertThat(tried.get(0).get("rel_l2").asDouble()).isLessThanOrEqualTo(j.at("/culprit/tolerance").asDouble());
        for (int i = 1; i < tried.size(); i++)
            assertThat(tried.get(i).get("rel_l2").isNull() || tried.get(i).get("rel_l2").asDouble() > 1e-2).as(tried.get(i).toString()).isTrue();
        assertThat(naming.get("clean_rel_l2").asDouble()).isGreaterThan(1e-3);
        // proved: the first substitution that heals sets the culprit layer's output right again, where it was wrong
        assertThat(naming.get("proved").asBoolean()).as(r.toString()).isTrue();
        JsonNode healed = null;
        for (var s : j.get("substitutions")) if (s.get("healed").asBoolean()) { healed = s; break; }
        assertThat(healed).isNotNull();
        assertThat(healed.get("replaced").asText()).startsWith(point.substring(point.indexOf('.', 7) + 1));
        assertThat(healed.get("before").asDouble()).isGreaterThan(healed.get("tolerance").asDouble());
        assertThat(healed.get("after").asDouble()).isLessThanOrEqualTo(healed.get("tolerance").asDouble());
    }

    @Test
    void aCleanEngineIsNamedNothing() throws Exception {
        var r = Cli.run("bisect", dumps.resolve("qwen35-tiny-moe/continuation").toString(), "--json");
        assertThat(r.code()).as(r.toString()).isZero();
        var j = r.json();
        assertThat(j.get("verdict").asText()).isEqualTo("match");
        assertThat(j.get("culprit").isNull()).isTrue();
        assertThat(j.get("variant").isNull()).isTrue();
        assertThat(j.has("catalog_naming")).isFalse();
    }

    /** A candidate dump (made with a fault) is named by replay; the substitutions run in the named fault's engine. */
    @Test
    void aCandidateDumpIsNamedAndProvedInItsStandIn() throws Exception {
        Path ref = dumps.resolve("qwen35-tiny/short"), out = tmp.resolve("cand");
        var d = Cli.run("dump", "--model", ReferenceCases.checkpointOf(ref).toString(), "--reference", ref.toString(),
                "--fault", "decay-exp-twice", "--out", out.toString());
        assertThat(d.code()).as(d.toString()).isZero();
        var r = Cli.run("bisect", ref.toString(), out.toString(), "--json");
        assertThat(r.code()).as(r.toString()).isEqualTo(1);
        var j = r.json();
        assertThat(j.at("/culprit/point").asText()).isEqualTo("layers.0.linear.decay");
        assertThat(j.at("/catalog_naming/named").asText()).isEqualTo("decay-exp-twice");
        assertThat(j.at("/catalog_naming/substituted_into").asText()).contains("decay-exp-twice");
        assertThat(j.at("/catalog_naming/proved").asBoolean()).isTrue();
    }

    @Test
    void theTerminalReportNamesAndProves() {
        var r = Cli.run("bisect", dumps.resolve("qwen35-tiny/long").toString(), "--fault", "state-kept-in-bf16");
        assertThat(r.code()).as(r.toString()).isEqualTo(1);
        assertThat(r.out()).contains("Naming: each catalog fault planted alone", "state-kept-in-bf16", "← reproduces the candidate",
                "CULPRIT  step 0, layer 0, layers.0.linear.state", "named: state-kept-in-bf16", "proved by substitution: yes", "✓ heals");
    }
}
