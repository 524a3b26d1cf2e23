package dev.decodiff.harness.report;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.harness.SyntheticDump;
import dev.decodiff.harness.compare.Comparison;
import dev.decodiff.harness.compare.ComparisonResult;
import dev.decodiff.harness.dump.CapturedTensor;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.Locale;

import static org.assertj.core.api.Assertions.assertThat;

class ReportsTest {
    @TempDir
    Path tmp;

    ComparisonResult result(boolean fault) {
        Path ref = SyntheticDump.write(tmp.resolve("ref"), SyntheticDump.NONE);
        Path cand = SyntheticDump.write(tmp.resolve("cand"), (s, t) -> {
            if (fault && s >= 1) {
                var k = t.get("layers.1.attn.k_read");
                t.put("layers.1.attn.v_read", new CapturedTensor("layers.1.attn.v_read", k.shape(), k.data().clone()));
            }
        });
        return Comparison.compareDumps(ref, cand, Comparison.Options.defaults());
    }

    @Test
    void jsonHasTheContractKeys() throws Exception {
        var json = new ObjectMapper().readTree(JsonReport.render(result(true)));
        assertThat(json.get("verdict").asText()).isEqualTo("divergence");
        var fd = json.get("first_divergence");
        assertThat(fd.get("step").asInt()).isEqualTo(1);
        assertThat(fd.get("layer").asInt()).isEqualTo(1);
        assertThat(fd.get("point").asText()).isEqualTo("layers.1.attn.v_read");
        assertThat(fd.get("rel_l2").asDouble()).isGreaterThan(0.1);
        assertThat(fd.get("tolerance").asDouble()).isEqualTo(1e-4);
        assertThat(fd.get("diagnosis").asText()).contains("are the keys");
        assertThat(fd.get("upstream")).hasSize(4);
        assertThat(json.get("cells").asInt()).isEqualTo(SyntheticDump.STEPS * 27);
        assertThat(json.get("observer_effect").asText()).isEqualTo("not_applicable");
        assertThat(json.get("tokens").get("agree").asInt()).isEqualTo(SyntheticDump.STEPS);
        assertThat(json.get("worst_by_kind").has("attn.v_read")).isTrue();
        assertThat(json.get("only_in_reference").isArray()).isTrue();

        var ok = new ObjectMapper().readTree(JsonReport.render(result(false)));
        assertThat(ok.get("verdict").asText()).isEqualTo("match");
        assertThat(ok.get("first_divergence").isNull()).isTrue();
    }

    @Test
    void reportsReadTheSameWhateverTheDefaultLocale() {
        var r = result(true);
        var before = Locale.getDefault();
        try {
            Locale.setDefault(Locale.ROOT);
            String text = TerminalReport.render(r, false), json = JsonReport.render(r), html = HtmlReport.render(r);
            // German writes 1,5e-07; Arabic (Egypt) writes other digits: neither may reach a report
            for (var l : new Locale[]{Locale.GERMANY, Locale.forLanguageTag("ar-EG")}) {
                Locale.setDefault(l);
                assertThat(TerminalReport.render(r, false)).as("terminal in %s", l).isEqualTo(text);
                assertThat(JsonReport.render(r)).as("JSON in %s", l).isEqualTo(json);
                assertThat(HtmlReport.render(r)).as("HTML in %s", l).isEqualTo(html);
            }
            assertThat(text).containsPattern("\\d\\.\\d+e[+-]\\d").doesNotContainPattern("\\d,\\d+e[+-]?\\d");
        } finally {
            Locale.setDefault(before);
        }
    }

    @Test
    void theThreeReportsShowTheSameFocusStep() throws Exception {
        var r = result(true);
        var d = StepDetail.of(r);
        var json = new ObjectMapper().readTree(JsonReport.render(r)).get("focus_step");
        assertThat(json.get("step").asInt()).isEqualTo(1).isEqualTo(d.step());
        assertThat(json.get("why").asText()).isEqualTo("first_divergence");
        var layer1 = json.get("layers").get(1);
        assertThat(layer1.get("layer").asInt()).isEqualTo(1);
        double v = layer1.get("rel_l2").get("attn.v_read").asDouble();
        assertThat(v).isEqualTo(r.firstDivergence().relL2());
        String shown = Fmt.rel(v);
        assertThat(TerminalReport.render(r, false)).contains("First divergent step: step 1").contains(shown + "✗");
        assertThat(HtmlReport.render(r)).contains("First divergent step: step 1").contains(">" + shown + "</td>");
        var ok = new ObjectMapper().readTree(JsonReport.render(result(false))).get("focus_step");
        assertThat(ok.get("why").asText()).isEqualTo("closest_call");
    }

    @Test
    void terminalReportHasTablesAndAPlainVerdict() {
        String text = TerminalReport.render(result(true), false);
        assertThat(text).doesNotContain("\u001b[");
        assertThat(text).contains("First divergent step: step 1").contains("v_read").contains("✗");
        assertThat(text).contains("Worst rel L2 per step × layer").contains("L0").contains("L2");
        assertThat(text).contains("DIVERGENCE").contains("Divergence at step 1 (decode, position 5), layer 1, layers.1.attn.v_read")
                .contains("Just upstream it is clean").contains("the values read back from the cache are the keys");
        String coloured = TerminalReport.render(result(true), true);
        assertThat(coloured).contains("\u001b[1;31m");
        String ok = TerminalReport.render(result(false), false);
        assertThat(ok).contains("MATCH").contains("Match: all 108 cells over 4 steps (a prefill of 5 tokens and 3 decode steps) are within tolerance");
    }

    @Test
    void htmlIsSelfContained() {
        String html = HtmlReport.render(result(true));
        assertThat(html).startsWith("<!DOCTYPE html>").contains("<svg").contains("<polyline").contains("DIVERGENCE")
                .contains("layers.1.attn.v_read");
        assertThat(html).doesNotContain("<script").doesNotContain("src=").doesNotContain("href=").doesNotContain("@import")
                .doesNotContain("url(");
    }

    @Test
    void progressBarIsSilentWhenNotATerminal() {
        var buf = new java.io.ByteArrayOutputStream();
        try (var bar = new ProgressBar("x", 10, new java.io.PrintStream(buf), false)) {
            bar.update(5);
        }
        assertThat(buf.size()).isZero();
        try (var bar = new ProgressBar("x", 10, new java.io.PrintStream(buf), true)) {
            bar.update(5);
        }
        assertThat(buf.toString()).contains("5/10");
    }
}
