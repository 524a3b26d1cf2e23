package dev.decodiff.harness.cli;

import dev.decodiff.harness.Home;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.harness.SyntheticDump;
import dev.decodiff.harness.dump.CapturedTensor;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.PrintWriter;
import java.io.RandomAccessFile;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/** The CLI in-process on synthetic dumps: exit codes, one-line errors naming the file, JSON and HTML output. */
public class CliTest {
    @TempDir
    Path tmp;

    public record Run(int code, String out, String err) {}

    public static Run run(String... args) {
        var out = new StringWriter();
        var err = new StringWriter();
        int code = Main.commandLine(new PrintWriter(out, true), new PrintWriter(err, true)).execute(args);
        return new Run(code, out.toString(), err.toString());
    }

    Path ref() { return SyntheticDump.write(tmp.resolve("ref"), SyntheticDump.NONE); }

    Path faulty() {
        return SyntheticDump.write(tmp.resolve("cand"), (s, t) -> {
            if (s == 2) t.get("layers.0.attn.out").data()[1] += 3f;
        });
    }

    @Test
    void matchIsZero() {
        var r = run("compare", ref().toString(), SyntheticDump.write(tmp.resolve("same"), SyntheticDump.NONE).toString());
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).contains("MATCH");
    }

    @Test
    void divergenceIsOneAndJsonIsValid() throws Exception {
        Path ref = ref(), cand = faulty();
        var r = run("compare", ref.toString(), cand.toString());
        assertThat(r.code()).isEqualTo(1);
        assertThat(r.out()).contains("Divergence at step 2").contains("layers.0.attn.out");
        var j = run("compare", ref.toString(), cand.toString(), "--json");
        assertThat(j.code()).isEqualTo(1);
        var json = new ObjectMapper().readTree(j.out());
        assertThat(json.get("verdict").asText()).isEqualTo("divergence");
        assertThat(json.get("first_divergence").get("point").asText()).isEqualTo("layers.0.attn.out");
        assertThat(json.get("first_divergence").get("step").asInt()).isEqualTo(2);
    }

    @Test
    void htmlReportIsWritten() throws Exception {
        Path html = tmp.resolve("sub/report.html");
        var r = run("compare", ref().toString(), faulty().toString(), "--html", html.toString());
        assertThat(r.code()).isEqualTo(1);
        assertThat(Files.readString(html)).contains("<svg");
        assertThat(r.err()).contains("HTML report written");
    }

    @Test
    void toleranceProfileCanHideADifference() throws Exception {
        Path prof = Files.writeString(tmp.resolve("loose.json"), "{\"points\": {\"attn.out\": 10}}");
        var r = run("compare", ref().toString(), faulty().toString(), "--tolerance", prof.toString());
        assertThat(r.code()).as(r.out()).isZero();
    }

    private void assertBadInput(Run r, String file) {
        assertThat(r.code()).as(r.out() + r.err()).isEqualTo(2);
        assertThat(r.out()).doesNotContain("MATCH");
        var lines = r.err().strip().lines().toList();
        assertThat(lines).hasSize(1);
        assertThat(lines.getFirst()).startsWith("decodiff: ").contains(file);
    }

    @Test
    void badInputsAreTwoWithOneLineNamingTheFile() throws Exception {
        Path ref = ref();
        // truncated step file
        Path a = SyntheticDump.write(tmp.resolve("trunc"), SyntheticDump.NONE);
        try (var raf = new RandomAccessFile(a.resolve("step-0001.safetensors").toFile(), "rw")) { raf.setLength(300); }
        assertBadInput(run("compare", ref.toString(), a.toString()), a.resolve("step-0001.safetensors").toString());
        // corrupted header
        Path b = SyntheticDump.write(tmp.resolve("corrupt"), SyntheticDump.NONE);
        byte[] bytes = Files.readAllBytes(b.resolve("step-0000.safetensors"));
        bytes[9] = '}';
        Files.write(b.resolve("step-0000.safetensors"), bytes);
        assertBadInput(run("compare", ref.toString(), b.toString()), b.resolve("step-0000.safetensors").toString());
        // schema / version / missing file
        Path c = SyntheticDump.write(tmp.resolve("version"), SyntheticDump.NONE);
        Files.writeString(c.resolve("manifest.json"), Files.readString(c.resolve("manifest.json")).replace("\"version\" : 1", "\"version\" : 3"));
        assertBadInput(run("compare", ref.toString(), c.toString()), c.resolve("manifest.json").toString());
        Path d = SyntheticDump.write(tmp.resolve("schema"), SyntheticDump.NONE);
        Files.writeString(d.resolve("manifest.json"), Files.readString(d.resolve("manifest.json")).replace("\"prompt_length\"", "\"prompt_len\""));
        assertBadInput(run("compare", ref.toString(), d.toString()), d.resolve("manifest.json").toString());
        Path e = SyntheticDump.write(tmp.resolve("missing"), SyntheticDump.NONE);
        Files.delete(e.resolve("step-0002.safetensors"));
        assertBadInput(run("compare", ref.toString(), e.toString()), e.resolve("step-0002.safetensors").toString());
        // shape mismatch
        Path f = SyntheticDump.write(tmp.resolve("shape"), (s, t) -> {
            var o = t.get("final_norm");
            t.put("final_norm", new CapturedTensor("final_norm", new long[]{o.data().length}, o.data()));
        });
        assertBadInput(run("compare", ref.toString(), f.toString()), f.resolve("step-0000.safetensors").toString());
        // NaN in the reference
        Path g = SyntheticDump.write(tmp.resolve("nanref"), (s, t) -> { if (s == 3) t.get("layers.2.out").data()[0] = Float.NaN; });
        assertBadInput(run("compare", g.toString(), ref.toString()), g.resolve("step-0003.safetensors").toString());
        // another checkpoint
        Path h = SyntheticDump.write(tmp.resolve("other"), SyntheticDump.NONE, "e".repeat(64), SyntheticDump.tokens());
        assertBadInput(run("compare", ref.toString(), h.toString()), h.resolve("manifest.json").toString());
        assertThat(run("compare", ref.toString(), h.toString(), "--allow-mismatch").code()).isZero();
        // no such folder, bad tolerance file
        assertBadInput(run("compare", ref.toString(), tmp.resolve("nope").toString()), tmp.resolve("nope").toString());
        Path prof = Files.writeString(tmp.resolve("p.json"), "[1]");
        assertBadInput(run("compare", ref.toString(), ref.toString(), "--tolerance", prof.toString()), prof.toString());
    }

    @Test
    void nanInTheCandidateIsADivergence() {
        Path c = SyntheticDump.write(tmp.resolve("nan"), (s, t) -> { if (s == 1) t.get("layers.1.attn.q").data()[2] = Float.NaN; });
        var r = run("compare", ref().toString(), c.toString());
        assertThat(r.code()).isEqualTo(1);
        assertThat(r.out()).contains("NaN/Inf");
    }

    @Test
    void usageErrorsAreTwoAndHelpIsZero() {
        assertThat(run("compare", "--no-such-option").code()).isEqualTo(2);
        assertThat(run("frobnicate").code()).isEqualTo(2);
        assertThat(run().code()).isEqualTo(2);
        assertThat(run("compare", "a", "b", "c").code()).isEqualTo(2);
        assertThat(run("compare", "--near-tie", "abc").code()).isEqualTo(2);
        assertThat(run("dump", "--model", "x").code()).isEqualTo(2);
        for (String cmd : new String[]{"compare", "dump", "run", "inspect"}) {
            var r = run(cmd, "--help");
            assertThat(r.code()).isZero();
            assertThat(r.out()).contains("Usage: decodiff " + cmd);
        }
        var v = run("--version");
        assertThat(v.code()).isZero();
        assertThat(v.out()).startsWith("decodiff ").contains("bf16 kernels: " + dev.decodiff.metal.NativeKernels.status())
                .contains("weights: " + dev.decodiff.engine.WeightResidency.policy())
                .contains("quantized weights: " + dev.decodiff.engine.quant.QuantizedTensors.policy())
                .contains("startup cache: none"); // a test JVM starts without the launcher's cache
        assertThat(run("--help").out()).contains("compare").contains("inspect").contains("Exit codes");
    }

    @Test
    void inspectDescribesADumpAndAStepFile() {
        Path ref = ref();
        var r = run("inspect", ref.toString());
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).contains("format decodiff-dump v1").contains("steps      4").contains("attn.v_read").contains("layers 0–2")
                .contains("[5, 2, 8]");
        var f = run("inspect", ref.resolve("step-0000.safetensors").toString());
        assertThat(f.code()).isZero();
        assertThat(f.out()).contains("layers.0.attn.k_read");
        assertBadInput(run("inspect", tmp.toString()), tmp.toString());
    }

    @Test
    void liveCompareWithAMissingDefaultCaseIsBadInput() {
        String old = System.getProperty("decodiff.home");
        System.setProperty("decodiff.home", tmp.toString());
        try {
            assertBadInput(run("compare"), tmp.resolve(Home.DEFAULT_CASE).toString());
            Path ref = ref();
            assertBadInput(run("compare", ref.toString()), ref.resolve("manifest.json").toString()); // no bundled checkpoint matches
        } finally {
            if (old == null) System.clearProperty("decodiff.home");
            else System.setProperty("decodiff.home", old);
        }
    }
}
