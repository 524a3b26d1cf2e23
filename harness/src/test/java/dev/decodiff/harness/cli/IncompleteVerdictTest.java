package dev.decodiff.harness.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.harness.SyntheticDump;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/** A comparison that did not cover every expected cell says so in all three outputs and exits 3, never 0. */
class IncompleteVerdictTest {
    @TempDir
    Path tmp;

    private Path killedAfter(String name, int steps) { return SyntheticDump.unfinished(tmp.resolve(name), steps); }

    private Path whole() { return SyntheticDump.write(tmp.resolve("whole"), SyntheticDump.NONE); }

    @Test
    void aKilledCandidateIsIncompleteInTheTerminalJsonAndHtml() throws Exception {
        Path ref = whole(), cand = killedAfter("killed", 2), html = tmp.resolve("r.html");
        var t = CliTest.run("compare", ref.toString(), cand.toString(), "--html", html.toString());
        assertThat(t.code()).as(t.out() + t.err()).isEqualTo(Main.INCOMPLETE).isEqualTo(3);
        assertThat(t.out()).contains("INCOMPLETE").doesNotContain("MATCH")
                .contains("missing: the candidate has 2 of the reference's 4 steps")
                .contains("missing: candidate: " + cand + " has no completeness mark");
        assertThat(Files.readString(html)).contains("class=\"verdict incomplete\"").contains("INCOMPLETE")
                .contains("Missing: the candidate has 2 of the reference's 4 steps");

        var j = CliTest.run("compare", ref.toString(), cand.toString(), "--json");
        assertThat(j.code()).isEqualTo(3);
        var json = new ObjectMapper().readTree(j.out());
        assertThat(json.get("verdict").asText()).isEqualTo("incomplete");
        var missing = json.get("missing");
        assertThat(missing.get("complete").asBoolean()).isFalse();
        assertThat(missing.get("reference_steps").asInt()).isEqualTo(4);
        assertThat(missing.get("candidate_steps").asInt()).isEqualTo(2);
        assertThat(missing.get("dumps").get(0).asText()).startsWith("candidate: " + cand);
    }

    @Test
    void aKilledReferenceDoesNotPassEitherAndTheCandidatesExtraStepsAreNamed() throws Exception {
        Path ref = killedAfter("killed-ref", 3), cand = whole();
        var r = CliTest.run("compare", ref.toString(), cand.toString());
        assertThat(r.code()).as(r.out() + r.err()).isEqualTo(3);
        assertThat(r.out()).contains("the candidate has 4 steps but the reference only 3")
                .contains("reference: " + ref + " has no completeness mark");
    }

    @Test
    void aWholeComparisonStillMatchesWithAnEmptyMissingObject() throws Exception {
        Path ref = whole(), cand = SyntheticDump.write(tmp.resolve("same"), SyntheticDump.NONE);
        var j = CliTest.run("compare", ref.toString(), cand.toString(), "--json");
        assertThat(j.code()).isZero();
        var json = new ObjectMapper().readTree(j.out());
        assertThat(json.get("verdict").asText()).isEqualTo("match");
        assertThat(json.get("missing").get("complete").asBoolean()).isTrue();
        assertThat(json.get("missing").get("reasons")).isEmpty();
    }

    @Test
    void aReferenceWithFewerPointsThanTheCandidateIsCompleteAndListsTheRest() throws Exception {
        Path ref = SyntheticDump.write(tmp.resolve("reduced"), (s, t) -> t.keySet().removeIf(p -> !p.startsWith("layers.1.") && !p.equals("logits")));
        SyntheticDump.selectPoints(ref, "layers.1.*", "logits");
        Path cand = whole();
        var r = CliTest.run("compare", ref.toString(), cand.toString());
        assertThat(r.code()).as(r.out() + r.err()).isZero();
        assertThat(r.out()).contains("MATCH").doesNotContain("missing:")
                .contains("only in the candidate (not compared, not needed: the reference does not hold them): embed");
        var json = new ObjectMapper().readTree(CliTest.run("compare", ref.toString(), cand.toString(), "--json").out());
        assertThat(json.get("verdict").asText()).isEqualTo("match");
        assertThat(json.get("missing").get("complete").asBoolean()).isTrue();
        assertThat(json.get("only_in_candidate")).isNotEmpty();
        // the other way round every point the reference holds must be compared
        var back = CliTest.run("compare", cand.toString(), ref.toString());
        assertThat(back.code()).as(back.out() + back.err()).isEqualTo(Main.MATCH); // excluded by the candidate's own selection
        assertThat(back.out()).contains("excluded by choice");
    }

    @Test
    void aCandidateLackingAPointTheReferenceHoldsIsStillIncomplete() {
        Path ref = whole(), cand = SyntheticDump.write(tmp.resolve("fewer"), (s, t) -> t.remove("layers.2.out"));
        var r = CliTest.run("compare", ref.toString(), cand.toString());
        assertThat(r.code()).as(r.out() + r.err()).isEqualTo(Main.INCOMPLETE);
        assertThat(r.out()).contains("missing: the candidate lacks 1 point the reference holds: layers.2.out");
    }

    @Test
    void theHelpFooterDocumentsExitCodeThree() {
        assertThat(CliTest.run("--help").out()).contains("3 incomplete");
        assertThat(CliTest.run("compare", "--help").out()).contains("3 incomplete");
    }
}
