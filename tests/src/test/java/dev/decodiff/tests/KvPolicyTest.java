package dev.decodiff.tests;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.Fault;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.engine.LayerType;
import dev.decodiff.harness.arch.gemma4.selfcheck.PolicyChecks;
import dev.decodiff.harness.selfcheck.SelfCheckResult;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.file.Path;
import java.util.Set;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * KV-cache policies on the bundled checkpoints, on the committed long prompt and its reference continuation:
 * every policy reproduces a fresh computation, and the two policy faults are caught at the cell their definition
 * fixes (the first position after the restore or the cut).
 */
class KvPolicyTest {
    record Case(int[] tokens, int promptLength) {}

    static Case longCase(String checkpoint) throws Exception {
        var m = new ObjectMapper().readTree(ReferenceCases.repoRoot().resolve("reference-dumps").resolve(checkpoint).resolve("long/manifest.json").toFile());
        int[] tokens = new int[m.get("tokens").size()];
        for (int i = 0; i < tokens.length; i++) tokens[i] = m.get("tokens").get(i).asInt();
        return new Case(tokens, m.get("prompt_length").asInt());
    }

    static Path checkpoint(String name) { return ReferenceCases.repoRoot().resolve("checkpoints").resolve(name); }

    @ParameterizedTest
    @ValueSource(strings = {"gemma4-tiny", "gemma4-tiny-ple", "gemma4-tiny-moe"})
    void everyPolicyIsCleanAndTheNaiveTrimDiverges(String name) throws Exception {
        var c = longCase(name);
        try (var model = Gemma4Model.load(checkpoint(name))) {
            var results = new PolicyChecks(model, EngineOptions.defaults()).runAll(c.tokens(), c.promptLength());
            assertThat(results).hasSize(5);
            for (SelfCheckResult r : results) assertThat(r.passed()).as("%s on %s: %s", r.check(), name, r.detail()).isTrue();
            var trim = results.stream().filter(r -> r.check().equals("naive-trim-diverges")).findFirst().orElseThrow();
            assertThat(trim.detail()).contains("diverges as expected at position " + Math.max(2, c.promptLength() / 2) + ",");
            System.out.println(name + " naive trim: " + trim.detail());
            var cut = results.stream().filter(r -> r.check().equals("truncate-sliding")).findFirst().orElseThrow();
            assertThat(cut.detail()).contains("refused as it must");
        }
    }

    @Test
    void staleRestoredPositionIsCaughtAtTheFirstRestoredTokensQuery() throws Exception {
        var c = longCase("gemma4-tiny");
        try (var model = Gemma4Model.load(checkpoint("gemma4-tiny"))) {
            var checks = new PolicyChecks(model, EngineOptions.defaults().withFaults(Set.of(Fault.PREFIX_REUSE_STALE_POSITION)));
            var r = checks.prefixReuse(c.tokens(), c.promptLength());
            int boundary = model.config().slidingWindow() + 1; // the shared-prefix boundary PolicyChecks uses for a long prompt
            assertThat(r.passed()).isFalse();
            assertThat(r.position()).isEqualTo(boundary);
            assertThat(r.point()).isEqualTo("layers.0.attn.q");
        }
    }

    @Test
    void slidingCacheCutPastItsValidPointIsCaughtInTheFirstSlidingLayer() throws Exception {
        var c = longCase("gemma4-tiny");
        try (var model = Gemma4Model.load(checkpoint("gemma4-tiny"))) {
            var checks = new PolicyChecks(model, EngineOptions.defaults().withFaults(Set.of(Fault.SLIDING_TRUNCATE)));
            var r = checks.truncateToSharedPrefix(c.tokens(), c.promptLength());
            int boundary = model.config().slidingWindow() + 1;
            int firstSliding = model.config().layers().stream().filter(l -> l.type() == LayerType.SLIDING).findFirst().orElseThrow().index();
            assertThat(r.passed()).isFalse();
            assertThat(r.position()).isEqualTo(boundary);
            assertThat(r.point()).isEqualTo("layers." + firstSliding + ".attn.k_read");
            assertThat(r.detail()).contains("past its valid point");
        }
    }
}
