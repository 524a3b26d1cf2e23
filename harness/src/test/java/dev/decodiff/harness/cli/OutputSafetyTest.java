package dev.decodiff.harness.cli;

import dev.decodiff.harness.SyntheticDump;
import dev.decodiff.harness.dump.CapturedTensor;
import dev.decodiff.harness.dump.DumpManifest;
import dev.decodiff.harness.dump.DumpWriter;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.File;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.List;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import static dev.decodiff.harness.cli.CliTest.run;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** Nothing the user has is overwritten, and a result that could not be written never passes for delivered. */
class OutputSafetyTest {
    @TempDir
    Path tmp;

    Path ref() { return dump("ref"); }

    /** A clean synthetic dump in tmp/name. */
    Path dump(String name) { return SyntheticDump.write(tmp.resolve(name), SyntheticDump.NONE); }

    /** sha256 of every file under dir, by relative path: the "nothing changed" check. */
    static TreeMap<String, String> fingerprint(Path dir) throws Exception {
        var m = new TreeMap<String, String>();
        try (var s = Files.walk(dir)) {
            for (Path p : s.filter(Files::isRegularFile).toList())
                m.put(dir.relativize(p).toString(), HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(Files.readAllBytes(p))));
        }
        return m;
    }

    private static void assertNoPartialFileIn(Path dir) throws IOException {
        try (var s = Files.list(dir)) {
            assertThat(s.map(p -> p.getFileName().toString()).toList()).noneMatch(n -> n.endsWith(".partial"));
        }
    }

    private static void assertRefused(CliTest.Run r, String... fragments) {
        assertThat(r.code()).as(r.out() + r.err()).isEqualTo(2);
        var lines = r.err().strip().lines().toList();
        assertThat(lines).as(r.err()).hasSize(1);
        assertThat(lines.getFirst()).startsWith("decodiff: ").contains(fragments);
    }

    @Test
    void dumpOutEqualToInsideOrContainingTheReferenceIsRefusedEvenWithForce() throws Exception {
        Path ref = ref();
        var before = fingerprint(ref);
        Path model = tmp.resolve("model");
        Files.createDirectories(model);
        assertRefused(run("dump", "--model", model.toString(), "--reference", ref.toString(), "--out", ref.toString(), "--force"),
                ref.toString(), "--out is the input");
        assertRefused(run("dump", "--model", model.toString(), "--reference", ref.toString(), "--out", ref.resolve("sub").toString(), "--force"),
                "--out is inside the input");
        assertRefused(run("dump", "--model", model.toString(), "--reference", ref.toString(), "--out", tmp.toString(), "--force"),
                "--out contains the input");
        // the same folder spelled through a symlink and through ".."
        Path link = Files.createSymbolicLink(tmp.resolve("link"), ref);
        assertRefused(run("dump", "--model", model.toString(), "--reference", ref.toString(), "--out", link.toString(), "--force"), "--out is the input");
        assertRefused(run("dump", "--model", model.toString(), "--reference", ref.toString(), "--out", ref.resolve("../ref").toString(), "--force"),
                "--out is the input");
        assertThat(fingerprint(ref)).isEqualTo(before);
    }

    @Test
    void dumpOutInsideTheModelFolderIsRefused() throws Exception {
        Path model = Files.createDirectories(tmp.resolve("model"));
        Files.writeString(model.resolve("config.json"), "{}");
        assertRefused(run("dump", "--model", model.toString(), "--tokens", "2,3", "--out", model.toString(), "--force"), "--out is the input");
        assertRefused(run("dump", "--model", model.toString(), "--tokens", "2,3", "--out", model.resolve("dump").toString()), "--out is inside the input");
        assertThat(Files.readString(model.resolve("config.json"))).isEqualTo("{}");
    }

    @Test
    void calibrateOutInsideAReferenceIsRefusedEvenWithForce() throws Exception {
        Path ref = ref();
        var before = fingerprint(ref);
        Path twin = dump("twin");
        assertRefused(run("calibrate", ref.toString(), twin.toString(), "--out", ref.resolve("manifest.json").toString(), "--force"),
                "--out is inside the input");
        assertRefused(run("calibrate", ref.toString(), twin.toString(), "--out", twin.resolve("p.json").toString()), "--out is inside the input");
        assertThat(fingerprint(ref)).isEqualTo(before);
    }

    @Test
    void htmlInsideAnInputIsRefusedBeforeAnyWork() throws Exception {
        Path ref = ref();
        Path cand = dump("cand");
        var before = fingerprint(cand);
        assertRefused(run("compare", ref.toString(), cand.toString(), "--html", cand.resolve("report.html").toString()), "--html is inside the input");
        assertThat(fingerprint(cand)).isEqualTo(before);
    }

    @Test
    void anHtmlReportThatCannotBeWrittenFailsAndLeavesNoFile() throws Exception {
        Path ref = ref();
        Path cand = dump("cand");
        Path blocker = Files.writeString(tmp.resolve("not-a-folder"), "x");
        Path html = blocker.resolve("report.html");
        var r = run("compare", ref.toString(), cand.toString(), "--html", html.toString());
        assertRefused(r, html.toString(), "cannot write the HTML report");
        assertThat(r.out()).contains("MATCH"); // the verdict was printed, but the run fails: the report asked for is missing
        assertThat(Files.readString(blocker)).isEqualTo("x");
        assertNoPartialFileIn(tmp);
    }

    @Test
    void anHtmlReportReplacesAnEarlierOneWholeAndLeavesNoTemporaryFile() throws Exception {
        Path ref = ref();
        Path cand = dump("cand");
        Path dir = Files.createDirectories(tmp.resolve("out"));
        Path html = dir.resolve("r.html");
        assertThat(run("compare", ref.toString(), cand.toString(), "--html", html.toString()).code()).isZero();
        assertThat(run("compare", ref.toString(), cand.toString(), "--html", html.toString()).code()).isZero();
        try (var s = Files.list(dir)) {
            assertThat(s.map(p -> p.getFileName().toString()).toList()).containsExactly("r.html");
        }
        assertThat(Files.readString(html)).startsWith("<!DOCTYPE html>").contains("</html>");
    }

    @Test
    void aStdoutThatFailsMakesTheRunFailWhateverTheVerdict() {
        Path ref = ref();
        Path cand = dump("cand");
        var broken = new PrintWriter(new OutputStream() {
            @Override
            public void write(int b) throws IOException { throw new IOException("No space left on device"); }
        }, true);
        var err = new StringWriter();
        int code = Main.commandLine(broken, new PrintWriter(err, true)).execute("compare", ref.toString(), cand.toString(), "--json");
        assertThat(code).isEqualTo(2);
        assertThat(err.toString()).contains("cannot write the result to standard output");
    }

    @Test
    void compareJsonToDevFullExitsNonZeroInARealProcess() throws Exception {
        Path ref = ref();
        Path cand = dump("cand");
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        Path errFile = tmp.resolve("stderr.txt");
        var p = new ProcessBuilder(List.of(java, "--add-modules", "jdk.incubator.vector", "--enable-native-access=ALL-UNNAMED",
                "-cp", System.getProperty("java.class.path"), Main.class.getName(), "compare", ref.toString(), cand.toString(), "--json"))
                .redirectOutput(new File("/dev/full")).redirectError(errFile.toFile()).start();
        assertThat(p.waitFor(120, TimeUnit.SECONDS)).isTrue();
        String err = Files.readString(errFile);
        assertThat(p.exitValue()).as(err).isEqualTo(2);
        assertThat(err).contains("cannot write the result to standard output");
    }

    @Test
    void aStepFileThatCannotBeWrittenLeavesNoPartialFile() throws Exception {
        Path dir = tmp.resolve("dump");
        var w = DumpWriter.create(dir, false, new DumpManifest.Producer("t", "1", "float32", "none"),
                new DumpManifest.Model("gemma4_text", 1, SyntheticDump.CONFIG_SHA, SyntheticDump.WEIGHTS_SHA), List.of(1, 2), 2);
        // A non-empty folder where the step file goes: the data is written, the final move fails.
        Files.createDirectories(dir.resolve(DumpManifest.stepFileName(0)).resolve("blocker"));
        var t = new CapturedTensor("embed", new long[]{2, 4}, new float[8]);
        assertThatThrownBy(() -> w.writeStep(0, 2, List.of(t), 1, 1.0)).hasMessageContaining(DumpManifest.stepFileName(0));
        assertNoPartialFileIn(dir);
    }

    @Test
    void aProfileOrReportInAReadOnlyPlaceFailsWithTheReasonAndNoFile() throws Exception {
        Path ref = ref();
        Path twin = dump("twin");
        // /proc takes no new files, not even from root: a read-only place wherever the tests run
        Path profile = Path.of("/proc/decodiff-test/profile.json");
        var r = run("calibrate", ref.toString(), twin.toString(), "--out", profile.toString());
        assertRefused(r, profile.toString(), "cannot write the profile");
        Path html = Path.of("/proc/decodiff-test/report.html");
        assertRefused(run("compare", ref.toString(), twin.toString(), "--html", html.toString()), html.toString(), "cannot write the HTML report");
        assertThat(Files.exists(profile.getParent())).isFalse();
    }
}
