package dev.decodiff.tests;

import dev.decodiff.harness.dump.CapturedTensor;
import dev.decodiff.harness.dump.DumpReader;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.io.RandomAccessFile;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/** `decodiff compare` end to end on the committed reference dumps and checkpoints. */
class CompareEndToEndTest {
    static Path root, defaultCase;

    @TempDir
    Path tmp;

    @BeforeAll
    static void home() {
        root = ReferenceCases.repoRoot();
        System.setProperty("decodiff.home", root.toString());
        defaultCase = root.resolve("reference-dumps/gemma4-tiny/long");
    }

    static List<Path> cases() { return ReferenceCases.fp32Cases(); }


    @Test
    void theDefaultCaseMatchesLiveWithNoObserverEffect() throws Exception {
        var r = Cli.run("compare", "--json");
        assertThat(r.code()).as(r.toString()).isZero();
        var j = r.json();
        assertThat(j.get("verdict").asText()).isEqualTo("match");
        assertThat(j.get("first_divergence").isNull()).isTrue();
        assertThat(j.get("observer_effect").asText()).isEqualTo("none");
        assertThat(j.get("cells").asInt()).isGreaterThan(100);
        assertThat(j.get("reference").asText()).endsWith("reference-dumps/gemma4-tiny/long");
        assertThat(j.get("tokens").get("flip").asInt()).isZero();
        var t = Cli.run("compare");
        assertThat(t.code()).as(t.toString()).isZero();
        assertThat(t.out()).contains("MATCH").contains("Match: all").contains("observer effect: none");
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    void everyBundledCaseMatchesLive(Path caseDir) throws Exception {
        var r = Cli.run("compare", caseDir.toString(), "--json", "--no-observer-check");
        assertThat(r.code()).as(r.toString()).isZero();
        var j = r.json();
        assertThat(j.get("verdict").asText()).as(j.get("verdict_text").asText()).isEqualTo("match");
        assertThat(j.get("only_in_reference")).as("every reference point is recorded live").isEmpty();
    }

    @Test
    void theBf16ReferenceMatchesLiveUnderTheBuiltInBf16Profile() throws Exception {
        var r = Cli.run("compare", root.resolve("reference-dumps/gemma4-tiny/long-bf16").toString(), "--json", "--no-observer-check");
        assertThat(r.code()).as(r.toString()).isZero();
        var j = r.json();
        assertThat(j.get("tolerance_profile").asText()).isEqualTo("built-in bf16 noise floor");
        // under fp32 tolerances, judged by accumulated error alone, the bf16 reference's own noise (~1e-2) is a divergence
        Path strict = Files.writeString(tmp.resolve("fp32.json"), "{\"default\": 1e-4}");
        var s = Cli.run("compare", root.resolve("reference-dumps/gemma4-tiny/long-bf16").toString(), "--tolerance", strict.toString(),
                "--no-observer-check", "--no-attribution");
        assertThat(s.code()).as(s.toString()).isEqualTo(1);
        // with attribution every failing cell's op is exact on the engine's own inputs: no divergence, no effect of the engine's
        var a = Cli.run("compare", root.resolve("reference-dumps/gemma4-tiny/long-bf16").toString(), "--tolerance", strict.toString(),
                "--no-observer-check", "--json");
        assertThat(a.code()).as(a.toString()).isZero();
        var aj = a.json();
        assertThat(aj.get("verdict").asText()).isEqualTo("precision");
        assertThat(aj.get("attribution").get("precision_effects")).isEmpty();
        for (var c : aj.get("attribution").get("cells")) assertThat(c.get("status").asText()).as(c.toString()).isEqualTo("exact");
    }

    @Test
    void aFaultSwitchedOnByHandIsFoundAtItsCell() throws Exception {
        var r = Cli.run("compare", "--fault", "k-eq-v-rotated-keys", "--json", "--no-observer-check");
        assertThat(r.code()).as(r.toString()).isEqualTo(1);
        var fd = r.json().get("first_divergence");
        int firstKEqV = firstKEqVLayer();
        assertThat(fd.get("step").asInt()).isEqualTo(1);
        assertThat(fd.get("layer").asInt()).isEqualTo(firstKEqV);
        assertThat(fd.get("point").asText()).isEqualTo("layers." + firstKEqV + ".attn.v_read");
        assertThat(fd.get("diagnosis").asText()).contains("layers." + firstKEqV + ".attn.k_read").contains("are the keys");
    }

    static int firstKEqVLayer() { return firstKEqVLayer(ReferenceCases.repoRoot().resolve("checkpoints/gemma4-tiny")); }

    static int firstKEqVLayerOf(dev.decodiff.harness.testing.ReferenceDump ref) {
        return firstKEqVLayer(ReferenceCases.checkpointOf(ref.dir()));
    }

    static int firstKEqVLayer(Path checkpoint) {
        var cfg = dev.decodiff.engine.Gemma4Config.read(checkpoint.resolve("config.json"));
        return cfg.layers().stream().filter(dev.decodiff.engine.LayerSpec::kEqV).findFirst().orElseThrow().index();
    }

    @Test
    void valuesReplacedByKeysInACopyOfARealDumpAreFoundAtExactlyThatCell() throws Exception {
        Path cand = DumpSurgery.copy(defaultCase, tmp.resolve("cand"));
        int step = 3, layer = 1;
        DumpSurgery.editStep(cand, step, t -> {
            var k = t.get("layers." + layer + ".attn.k_read");
            t.put("layers." + layer + ".attn.v_read", new CapturedTensor("layers." + layer + ".attn.v_read", k.shape(), k.data().clone()));
        });
        var r = Cli.run("compare", defaultCase.toString(), cand.toString(), "--json");
        assertThat(r.code()).as(r.toString()).isEqualTo(1);
        var fd = r.json().get("first_divergence");
        assertThat(fd.get("step").asInt()).isEqualTo(step);
        assertThat(fd.get("layer").asInt()).isEqualTo(layer);
        assertThat(fd.get("point").asText()).isEqualTo("layers.1.attn.v_read");
        assertThat(fd.get("diagnosis").asText()).contains("bit-identical to the reference's layers.1.attn.k_read");
        var same = Cli.run("compare", defaultCase.toString(), DumpSurgery.copy(defaultCase, tmp.resolve("same")).toString());
        assertThat(same.code()).as(same.toString()).isZero();
    }

    @Test
    void dumpTeacherForcedThenCompareDumpToDump() throws Exception {
        Path out = tmp.resolve("mine");
        var d = Cli.run("dump", "--model", root.resolve("checkpoints/gemma4-tiny").toString(), "--reference", defaultCase.toString(),
                "--out", out.toString());
        assertThat(d.code()).as(d.toString()).isZero();
        var mine = DumpReader.open(out);
        var ref = DumpReader.open(defaultCase);
        assertThat(mine.stepCount()).isEqualTo(ref.stepCount());
        assertThat(mine.allPoints()).isEqualTo(ref.allPoints());
        assertThat(mine.manifest().model().configSha256()).isEqualTo(ref.manifest().model().configSha256());
        assertThat(mine.manifest().model().weightsSha256()).isEqualTo(ref.manifest().model().weightsSha256());
        var c = Cli.run("compare", defaultCase.toString(), out.toString());
        assertThat(c.code()).as(c.toString()).isZero();
        var again = Cli.run("dump", "--model", root.resolve("checkpoints/gemma4-tiny").toString(), "--reference", defaultCase.toString(),
                "--out", out.toString());
        assertThat(again.code()).isEqualTo(2);
        assertThat(again.err()).contains(out.toString()).contains("--force");
    }

    @Test
    void htmlReportOfALiveRun() throws Exception {
        Path html = tmp.resolve("report.html");
        var r = Cli.run("compare", "--html", html.toString(), "--fault", "k-eq-v-rotated-keys", "--no-observer-check");
        assertThat(r.code()).as(r.toString()).isEqualTo(1);
        assertThat(Files.readString(html)).contains("<svg").contains("attn.v_read").contains("DIVERGENCE");
    }

    // ------------------------------------------------------------------ bad input on copies of real dumps

    private void assertBadInput(Cli r, Path file) {
        assertThat(r.code()).as(r.toString()).isEqualTo(2);
        assertThat(r.out()).doesNotContain("MATCH");
        var lines = r.err().strip().lines().toList();
        assertThat(lines).as(r.toString()).hasSize(1);
        assertThat(lines.getFirst()).startsWith("decodiff: ").contains(file.toString());
    }

    private Path copy(String name) { return DumpSurgery.copy(defaultCase, tmp.resolve(name)); }

    @Test
    void truncatedSafetensors() throws Exception {
        Path c = copy("trunc");
        Path f = c.resolve("step-0004.safetensors");
        try (var raf = new RandomAccessFile(f.toFile(), "rw")) { raf.setLength(raf.length() / 2); }
        assertBadInput(Cli.run("compare", defaultCase.toString(), c.toString()), f);
        assertBadInput(Cli.run("compare", c.toString()), f);
    }

    @Test
    void corruptedHeader() throws Exception {
        Path c = copy("corrupt");
        Path f = c.resolve("step-0000.safetensors");
        byte[] b = Files.readAllBytes(f);
        for (int i = 10; i < 30; i++) b[i] = (byte) 0xff;
        Files.write(f, b);
        assertBadInput(Cli.run("compare", defaultCase.toString(), c.toString()), f);
    }

    @Test
    void manifestBreakingTheSchema() throws Exception {
        Path c = copy("schema");
        DumpSurgery.editManifest(c, s -> s.replaceFirst("\"prompt_length\"\\s*:\\s*\\d+", "\"prompt_length\": \"long\""));
        assertBadInput(Cli.run("compare", defaultCase.toString(), c.toString()), c.resolve("manifest.json"));
    }

    @Test
    void manifestNamingAMissingFile() throws Exception {
        Path c = copy("missing");
        Files.delete(c.resolve("step-0002.safetensors"));
        assertBadInput(Cli.run("compare", defaultCase.toString(), c.toString()), c.resolve("step-0002.safetensors"));
    }

    @Test
    void unknownVersion() throws Exception {
        Path c = copy("version");
        DumpSurgery.editManifest(c, s -> s.replaceFirst("\"version\"\\s*:\\s*1", "\"version\": 2"));
        var r = Cli.run("compare", defaultCase.toString(), c.toString());
        assertBadInput(r, c.resolve("manifest.json"));
        assertThat(r.err()).contains("version 2");
    }

    @Test
    void shapeMismatch() throws Exception {
        Path c = copy("shape");
        DumpSurgery.editStep(c, 1, t -> {
            var o = t.get("layers.0.out");
            t.put("layers.0.out", new CapturedTensor("layers.0.out", new long[]{o.data().length}, o.data()));
        });
        assertBadInput(Cli.run("compare", defaultCase.toString(), c.toString()), c.resolve("step-0001.safetensors"));
    }

    @Test
    void nanInTheReference() throws Exception {
        Path c = copy("nan");
        DumpSurgery.editStep(c, 2, t -> t.get("final_norm").data()[3] = Float.NaN);
        assertBadInput(Cli.run("compare", c.toString(), defaultCase.toString()), c.resolve("step-0002.safetensors"));
        assertBadInput(Cli.run("compare", c.toString()), c.resolve("step-0002.safetensors"));
    }

    @Test
    void referenceFromAnotherCheckpoint() throws Exception {
        Path other = root.resolve("reference-dumps/gemma4-tiny-ple/long");
        assertBadInput(Cli.run("compare", defaultCase.toString(), other.toString()), other.resolve("manifest.json"));
        // live: the reference of another checkpoint against --model gemma4-tiny
        assertBadInput(Cli.run("compare", other.toString(), "--model", root.resolve("checkpoints/gemma4-tiny").toString()),
                root.resolve("checkpoints/gemma4-tiny"));
        // a reference whose hashes match no bundled checkpoint
        Path c = copy("foreign");
        DumpSurgery.editManifest(c, s -> s.replaceFirst("\"config_sha256\"\\s*:\\s*\"[0-9a-f]{64}\"", "\"config_sha256\": \"" + "0".repeat(64) + "\""));
        assertBadInput(Cli.run("compare", c.toString()), c.resolve("manifest.json"));
    }

    @org.junit.jupiter.api.Test
    void htmlNeverOverwritesAFileThatIsNotADecodiffReport() throws Exception {
        Path mine = tmp.resolve("notes.html");
        java.nio.file.Files.writeString(mine, "my own notes");
        var r = Cli.run("compare", "--html", mine.toString());
        assertThat(r.code()).isEqualTo(2);
        assertThat(r.err()).contains(mine.toString()).contains("not a decodiff report");
        assertThat(java.nio.file.Files.readString(mine)).isEqualTo("my own notes");
    }
}
