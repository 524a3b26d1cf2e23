package dev.decodiff.harness.cli;

import dev.decodiff.harness.Printable;
import dev.decodiff.harness.SyntheticDump;
import dev.decodiff.harness.compare.Comparison;
import dev.decodiff.harness.dump.CapturedTensor;
import dev.decodiff.harness.report.TerminalReport;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.regex.Pattern;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Names from a dump reach the terminal escaped: an ESC sequence, a BEL, a bidi override or a NUL in a tensor name is
 * printed as {@code \u001b}, {@code \u0007}, {@code \u202e}, {@code \u0000} by validate, inspect, compare's report and
 * every error line, and a 10,000-character name is cut with a visible marker.
 */
class TerminalSafetyTest {
    @TempDir
    Path tmp;

    static final String HOSTILE = "my.\u001b[2J\u001b]0;pwned\u0007name\u202ereversed\u0000end";
    static final String LONG = "my." + "x".repeat(10_000);

    private static final SyntheticDump.Mutation NAMES = (s, t) -> {
        t.put(HOSTILE, new CapturedTensor(HOSTILE, new long[]{3}, new float[]{1, 2, 3}));
        t.put(LONG, new CapturedTensor(LONG, new long[]{2}, new float[]{1, 2}));
    };

    /** No character that could steer a terminal; everything but the line breaks must be printable. */
    static void assertNoRawControl(String text) {
        text.codePoints().filter(c -> c != '\n').forEach(c ->
                assertThat(Printable.needsEscape(c)).as("U+%04X in %s", c, text.length() > 400 ? text.substring(0, 400) + "…" : text).isFalse());
    }

    private static void assertSafe(CliTest.Run r) {
        assertNoRawControl(r.out());
        assertNoRawControl(r.err());
        assertThat(r.out() + r.err()).doesNotContain("x".repeat(Printable.MAX_WORD + 1));
    }

    @Test
    void validateEscapesNamesAndCutsTheLongOne() {
        Path d = SyntheticDump.write(tmp.resolve("d"), NAMES);
        var r = CliTest.run("validate", d.toString());
        assertThat(r.code()).as(r.out() + r.err()).isZero();
        assertSafe(r);
        assertThat(r.out()).contains("my.\\u001b[2J\\u001b]0;pwned\\u0007name\\u202ereversed\\u0000end").contains("more characters]");
    }

    @Test
    void validateEscapesNamesInProblemsToo() {
        Path d = SyntheticDump.write(tmp.resolve("d"), (s, t) -> {
            NAMES.apply(s, t);
            if (s == 2) t.remove(HOSTILE);
        });
        var r = CliTest.run("validate", d.toString());
        assertThat(r.code()).isEqualTo(Main.BAD_INPUT);
        assertSafe(r);
        assertThat(r.out()).contains("lacks 1 point(s) other steps hold: my.\\u001b[2J");
    }

    @Test
    void inspectEscapesNames() {
        Path d = SyntheticDump.write(tmp.resolve("d"), NAMES);
        var r = CliTest.run("inspect", d.toString());
        assertThat(r.code()).as(r.out() + r.err()).isZero();
        assertSafe(r);
        assertThat(r.out()).contains("\\u202ereversed").contains("more characters]");
        var f = CliTest.run("inspect", d.resolve("step-0001.safetensors").toString());
        assertSafe(f);
        assertThat(f.out()).contains("\\u0007name");
    }

    @Test
    void compareEscapesNamesInTheReportAndInErrors() {
        Path ref = SyntheticDump.write(tmp.resolve("ref"), NAMES);
        Path cand = SyntheticDump.write(tmp.resolve("cand"), (s, t) -> {
            NAMES.apply(s, t);
            if (s == 1) t.get(HOSTILE).data()[0] = 9;
        });
        var r = CliTest.run("compare", ref.toString(), cand.toString());
        assertThat(r.code()).as(r.out() + r.err()).isEqualTo(Main.DIVERGENCE);
        assertSafe(r);
        assertThat(r.out()).contains("my.\\u001b[2J");

        Path bad = SyntheticDump.write(tmp.resolve("bad"), (s, t) -> {
            NAMES.apply(s, t);
            t.put(HOSTILE, new CapturedTensor(HOSTILE, new long[]{4}, new float[4]));
        });
        var e = CliTest.run("compare", ref.toString(), bad.toString());
        assertThat(e.code()).isEqualTo(Main.BAD_INPUT);
        assertSafe(e);
        assertThat(e.err()).contains("tensor 'my.\\u001b[2J");
    }

    @Test
    void theColouredReportKeepsItsOwnCodesAndEscapesTheInputs() {
        Path ref = SyntheticDump.write(tmp.resolve("ref"), NAMES);
        Path cand = SyntheticDump.write(tmp.resolve("cand"), (s, t) -> {
            NAMES.apply(s, t);
            if (s == 1) t.get(HOSTILE).data()[0] = 9;
        });
        String text = TerminalReport.render(Comparison.compareDumps(ref, cand, Comparison.Options.defaults()), true);
        assertThat(text).contains("\u001b[1;31mDIVERGENCE\u001b[0m").contains("my.\\u001b[2J");
        // every raw ESC left is one of the report's own colour codes
        assertThat(Pattern.compile("\u001b\\[[0-9;]*m").matcher(text).replaceAll("")).doesNotContain("\u001b");
        assertNoRawControl(Pattern.compile("\u001b\\[[0-9;]*m").matcher(text).replaceAll(""));
    }

    @Test
    void theJsonOutputEscapesThemTooAndStillReadsBackTheSameName() throws Exception {
        Path ref = SyntheticDump.write(tmp.resolve("ref"), NAMES), cand = SyntheticDump.write(tmp.resolve("cand"), NAMES);
        var c = CliTest.run("compare", ref.toString(), cand.toString(), "--json");
        assertThat(c.code()).as(c.out() + c.err()).isZero();
        assertNoRawControl(c.out());
        assertThat(c.out()).containsIgnoringCase("\\u202e").containsIgnoringCase("\\u001b");
        var json = new com.fasterxml.jackson.databind.ObjectMapper().readTree(c.out());
        var texts = new java.util.ArrayList<String>();
        collectTexts(json, texts);
        assertThat(texts).anyMatch(t -> t.contains(HOSTILE));
        var v = CliTest.run("validate", cand.toString(), "--json");
        assertNoRawControl(v.out());
        assertThat(new com.fasterxml.jackson.databind.ObjectMapper().readTree(v.out()).get("notes").get(0).asText()).contains(HOSTILE);
    }

    @Test
    void inspectOfADumpWhoseManifestIsAFolderSaysSo() throws Exception {
        Path d = SyntheticDump.write(tmp.resolve("d"), SyntheticDump.NONE), mf = d.resolve("manifest.json");
        java.nio.file.Files.delete(mf);
        java.nio.file.Files.createDirectory(mf);
        var r = CliTest.run("inspect", d.toString());
        assertThat(r.code()).isEqualTo(Main.BAD_INPUT);
        assertThat(r.err()).contains(mf + ": is not a regular file but a directory");
    }

    private static void collectTexts(com.fasterxml.jackson.databind.JsonNode n, java.util.List<String> out) {
        if (n.isTextual()) out.add(n.asText());
        n.forEach(child -> collectTexts(child, out));
    }
}
