package dev.decodiff.tests;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.engine.qwen35.Qwen35Fault;
import dev.decodiff.harness.selftest.SelfTestReport;
import dev.decodiff.harness.selftest.SelfTestResult;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * `decodiff selftest` on Qwen3.5's catalog: every fault planted in decodiff's engine is localized by compare, against
 * transformers' own references of the bundled Qwen checkpoints, at the cell its catalog rule gives, and bisect names it
 * by replay; the clean engine matches every reference and names nothing.
 */
class Qwen35SelfTestTest {
    static final ObjectMapper JSON = new ObjectMapper();
    static Path root;
    static SelfTestResult result;
    static JsonNode json;

    @BeforeAll
    static void run() throws Exception {
        root = ReferenceCases.repoRoot();
        result = CatalogSelfTestRun.result();
        json = JSON.readTree(SelfTestReport.json(result)).get("qwen35");
    }

    @Test
    void everyFaultIsLocalizedAndNamedWithNoFalseAlarm() {
        var misses = new ArrayList<String>();
        for (var run : json.get("runs")) {
            String status = run.get("status").asText();
            if (!status.equals("localized") && !status.equals("clean") && !status.equals("n-a"))
                misses.add(status + ": " + run.get("fault").asText() + " on " + run.get("checkpoint").asText() + "/" + run.get("case").asText()
                        + ": compare → " + run.get("compare").asText() + ", named " + run.get("named") + "; " + run.get("detail").asText());
        }
        assertThat(misses).as("misses and false alarms").isEmpty();
        assertThat(json.get("false_alarms").asLong()).isZero();
        assertThat(json.get("localized").asLong()).isEqualTo(json.get("applicable").asLong()).isPositive();
        assertThat(json.get("named").asLong()).isEqualTo(json.get("naming_runs").asLong()).isPositive();
        assertThat(result.passed()).isTrue();
        assertThat(json.get("checkpoints").toString()).contains("qwen35-tiny", "qwen35-tiny-moe");

        // every catalog fault is localized somewhere, and the clean engine ran on every case
        for (var f : Qwen35Fault.values()) {
            long localized = 0;
            for (var run : json.get("runs")) if (run.get("fault").asText().equals(f.id()) && run.get("status").asText().equals("localized")) localized++;
            assertThat(localized).as("%s is localized on some checkpoint and case", f.id()).isPositive();
        }
        long clean = 0;
        for (var run : json.get("runs")) if (run.get("fault").asText().equals("clean")) clean++;
        assertThat(clean).isEqualTo(3L * json.get("checkpoints").size());
    }

    /**
     * The cells, written out by hand from the checkpoints' layer_types (qwen35-tiny [L, F, L, F], qwen35-tiny-moe
     * [L, L, L, F]) and the cases' steps (long: prompt 70, one-token steps; continuation: step 6 feeds 9 tokens),
     * not from the catalog's rules: what compare found on transformers' references.
     */
    @Test
    void theIssuesFaultsSitAtTheirStatePointsAndCells() {
        var cells = Map.ofEntries(
                Map.entry("conv-state-not-carried qwen35-tiny long", "step 1, layers.0.linear.conv_state_read"),
                Map.entry("conv-state-dropped-on-continuation qwen35-tiny continuation", "step 6, layers.0.linear.conv_state_read"),
                Map.entry("conv-state-dropped-on-continuation qwen35-tiny-moe continuation", "step 6, layers.0.linear.conv_state_read"),
                Map.entry("conv-state-dropped-on-continuation qwen35-tiny long", "match"),
                Map.entry("state-stale qwen35-tiny short", "step 2, layers.0.linear.state_read"),
                Map.entry("state-kept-in-bf16 qwen35-tiny long", "step 0, layers.0.linear.state"),
                Map.entry("decode-decay-after-update qwen35-tiny long", "step 1, layers.0.linear.core_out"),
                Map.entry("beta-missing qwen35-tiny long", "step 0, layers.0.linear.core_out"),
                Map.entry("qk-l2norm-mean qwen35-tiny long", "step 0, layers.0.linear.q"),
                Map.entry("conv-taps-reversed qwen35-tiny long", "step 0, layers.0.linear.q"),
                Map.entry("linear-heads-tiled qwen35-tiny-moe long", "step 0, layers.0.linear.q"),
                Map.entry("gated-norm-one-plus qwen35-tiny long", "step 0, layers.0.linear.out"),
                Map.entry("norm-one-plus-twice qwen35-tiny long", "step 0, layers.0.linear.conv_state"),
                Map.entry("query-gate-split-halves qwen35-tiny long", "step 0, layers.1.attn.q"),
                Map.entry("query-gate-split-halves qwen35-tiny-moe long", "step 0, layers.3.attn.q"),
                Map.entry("partial-rope-whole-head qwen35-tiny-moe long", "step 0, layers.3.attn.q"),
                Map.entry("moe-shared-gate-missing qwen35-tiny long", "match"));
        for (var e : cells.entrySet()) {
            String[] k = e.getKey().split(" ");
            JsonNode run = null;
            for (var r : json.get("runs"))
                if (r.get("fault").asText().equals(k[0]) && r.get("checkpoint").asText().equals(k[1]) && r.get("case").asText().equals(k[2])) run = r;
            assertThat(run).as(e.getKey()).isNotNull();
            assertThat(run.get("compare").asText()).as(e.getKey()).isEqualTo(e.getValue());
            if (!e.getValue().equals("match")) assertThat(run.get("named").asText()).as(e.getKey()).isEqualTo(k[0]);
        }
    }

    @Test
    void theTerminalTableListsTheQwenRows() {
        String t = SelfTestReport.terminal(result, false);
        assertThat(t).contains("Qwen3.5's catalog");
        for (var f : Qwen35Fault.values()) assertThat(t).contains("  " + f.id() + " ");
        assertThat(t).containsPattern("state-kept-in-bf16 +✓ 3/3");
        assertThat(t).containsPattern("conv-state-dropped-on-continuation +✓ 3/3 \\(2 match\\)");
        assertThat(t).contains("PASS");
    }
}
