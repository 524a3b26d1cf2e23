package dev.decodiff.tests;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.llamacpp.ffi.LlamaCppHome;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A few of llamacpp/porting-bugs/, built into llama.cpp natively (scripts/llamacpp-native.sh --patch) and run live on
 * gemma4-tiny's long case: the patched llama.cpp's dump against the clean native build's dump of the same case first
 * diverges exactly at the cell manifest.tsv names (read off the graph), and the clean build against a second clean run
 * is a match, and the dumps name the build (native, with the patch). One patch in the value path of a k_eq_v layer, one decode-only path (n_tokens == 1), one outside the
 * model file (the KV cache's sliding-window mask). Skipped unless the native build is already made (a first build takes
 * about 10 minutes on two cores; run scripts/llamacpp-native.sh once). Each llama.cpp runs in its own JVM, since a JVM
 * loads one llama.cpp.
 *
 * <p>The same for three of the Qwen3.5 patches: a state hand-over (the recurrent state read back transposed: found at
 * the first decode step's state read, since a state starting from zero is unaffected), a decode-only path (the
 * single-token delta rule decaying after its update: the first decode step's core output) and the MoE shared expert's
 * gate without its sigmoid (the prefill's first MoE output).
 */
class LlamaCppPortingBugsTest {
    static final ObjectMapper JSON = new ObjectMapper();
    static final List<String> BUGS = List.of("01-k-eq-v-value-after-rope", "09-decode-rope-drops-proportional", "13-kv-cache-window-off-by-one");
    /** Qwen3.5 patches, each with the checkpoint it runs on here. */
    static final List<List<String>> QWEN35_BUGS = List.of(
            List.of("16-recurrent-state-read-transposed", "qwen35-tiny-llamacpp"),
            List.of("26-decode-decay-after-update", "qwen35-tiny-llamacpp"),
            List.of("25-moe-shared-gate-sigmoid-dropped", "qwen35-tiny-moe-llamacpp"));
    static Path root, clean;

    @TempDir
    Path tmp;

    @BeforeAll
    static void nativeBuild() throws Exception {
        root = ReferenceCases.repoRoot();
        var r = Exec.run(root, List.of(root.resolve("scripts/llamacpp-native.sh").toString(), "--cached"));
        Assumptions.assumeTrue(r.code() == 0, "llama.cpp's native build is not made: run scripts/llamacpp-native.sh once (about 10 minutes)");
        clean = Path.of(r.out().strip());
        System.setProperty("decodiff.home", root.toString());
    }

    @Test
    void eachPatchedLlamaCppFirstDivergesFromCleanLlamaCppAtTheCellItsManifestNames() throws Exception {
        var expected = manifest();
        Path ref = root.resolve("reference-dumps/gemma4-tiny/long");
        Path cleanDump = dump(clean, "gemma4-tiny", ref, tmp.resolve("clean"));
        Path again = dump(clean, "gemma4-tiny", ref, tmp.resolve("clean-again"));
        var self = compare(cleanDump, again);
        assertThat(self.get("verdict").asText()).as("clean llama.cpp against itself").isIn("match", "precision");
        assertThat(self.get("first_divergence").isNull()).as("clean llama.cpp against itself: no divergence").isTrue();
        // the native build loaded as such: its own library names, the CPU backend linked in
        var producer = JSON.readTree(cleanDump.resolve("manifest.json").toFile()).get("producer");
        assertThat(producer.get("version").asText()).isEqualTo("v0.5.0 (native build)");
        assertThat(producer.get("kernels").asText()).isEqualTo("built-in libggml-cpu.so");
        for (String bug : BUGS) {
            var built = Exec.run(root, List.of(root.resolve("scripts/llamacpp-native.sh").toString(), "--patch",
                    root.resolve("llamacpp/porting-bugs/" + bug + ".patch").toString()));
            assertThat(built.code()).as(bug + ": " + built.err()).isZero();
            Path lib = Path.of(built.out().strip());
            assertThat(lib).isNotEqualTo(clean);
            Path patched = dump(lib, "gemma4-tiny", ref, tmp.resolve(bug));
            assertThat(JSON.readTree(patched.resolve("manifest.json").toFile()).get("producer").get("version").asText())
                    .isEqualTo("v0.5.0 (native build with " + bug + ".patch)");
            var j = compare(cleanDump, patched);
            assertThat(j.get("verdict").asText()).as(bug).isEqualTo("divergence");
            var fd = j.get("first_divergence");
            assertThat(fd.get("step").asInt() + " " + fd.get("point").asText()).as(bug + ": first divergence from clean llama.cpp")
                    .isEqualTo(expected.get(bug + " gemma4-tiny"));
        }
    }

    @Test
    void eachPatchedQwen35FirstDivergesFromCleanLlamaCppAtTheCellItsManifestNames() throws Exception {
        var expected = manifest();
        var cleanDumps = new java.util.HashMap<String, Path>();
        for (var bug : QWEN35_BUGS) {
            String name = bug.get(0), ck = bug.get(1);
            Path ref = root.resolve("reference-dumps/" + ck + "/long");
            Path cleanDump = cleanDumps.computeIfAbsent(ck, c -> {
                try {
                    return dump(clean, c, ref, tmp.resolve("clean-" + c));
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            });
            var built = Exec.run(root, List.of(root.resolve("scripts/llamacpp-native.sh").toString(), "--patch",
                    root.resolve("llamacpp/porting-bugs/" + name + ".patch").toString()));
            assertThat(built.code()).as(name + ": " + built.err()).isZero();
            var j = compare(cleanDump, dump(Path.of(built.out().strip()), ck, ref, tmp.resolve(name)));
            assertThat(j.get("verdict").asText()).as(name).isEqualTo("divergence");
            var fd = j.get("first_divergence");
            assertThat(fd.get("step").asInt() + " " + fd.get("point").asText()).as(name + " on " + ck + ": first divergence from clean llama.cpp")
                    .isEqualTo(expected.get(name + " " + ck));
            assertThat(fd.get("rel_l2").asDouble()).as(name + ": far above llama.cpp's own noise").isGreaterThan(1e-2);
        }
    }

    /**
     * bisect --engine llama.cpp on Qwen3.5: the reference's conv and recurrent states written into the patched graph,
     * the culprit is the manifest's cell (a decode-only delta rule at core_out, a transposed state read at the read
     * itself), named by decodiff's catalog where one of its faults is the same bug; clean llama.cpp has no culprit.
     */
    @Test
    void bisectOnPatchedQwen35NamesTheManifestsCellAndTheCatalogFaultWhereOneFits() throws Exception {
        var expected = manifest();
        Path ref = root.resolve("reference-dumps/qwen35-tiny-llamacpp/long");
        var cleanRun = bisect(clean, ref);
        assertThat(cleanRun.get("culprit").isNull()).as("clean llama.cpp: " + cleanRun).isTrue();
        for (var bug : List.of(List.of("26-decode-decay-after-update", "decode-decay-after-update"), List.of("16-recurrent-state-read-transposed", ""))) {
            String name = bug.get(0);
            var built = Exec.run(root, List.of(root.resolve("scripts/llamacpp-native.sh").toString(), "--patch",
                    root.resolve("llamacpp/porting-bugs/" + name + ".patch").toString()));
            assertThat(built.code()).as(name + ": " + built.err()).isZero();
            var j = bisect(Path.of(built.out().strip()), ref);
            var c = j.get("culprit");
            assertThat(c.isNull()).as(name).isFalse();
            assertThat(c.get("step").asInt() + " " + c.get("point").asText()).as(name).isEqualTo(expected.get(name + " qwen35-tiny-llamacpp"));
            if (bug.get(1).isEmpty()) assertThat(c.has("variant")).as(name + ": no catalog fault is this bug").isFalse();
            else assertThat(c.get("variant").get("name").asText()).as(name).isEqualTo(bug.get(1));
        }
    }

    /** `decodiff bisect REF --engine llama.cpp --json` on qwen35-tiny-llamacpp with llama.cpp from {@code lib}, in a JVM of its own. */
    private static JsonNode bisect(Path lib, Path ref) throws Exception {
        var java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        var r = Exec.run(root, List.of(java, "--add-modules", "jdk.incubator.vector", "--enable-native-access=ALL-UNNAMED",
                "-D" + LlamaCppHome.PROPERTY + "=" + lib, "-Ddecodiff.home=" + root, "-cp", System.getProperty("java.class.path"),
                "dev.decodiff.harness.cli.Main", "bisect", ref.toString(), "--engine", "llama.cpp", "--json"));
        assertThat(r.out()).as(r.toString()).startsWith("{");
        return JSON.readTree(r.out());
    }

    /** manifest.tsv: "patch checkpoint" → "step point" (a patch has one row per checkpoint where its cell differs). */
    private static java.util.Map<String, String> manifest() throws IOException {
        var m = new java.util.HashMap<String, String>();
        for (String line : Files.readAllLines(root.resolve("llamacpp/porting-bugs/manifest.tsv"))) {
            if (line.isBlank() || line.startsWith("#")) continue;
            String[] f = line.split("\t");
            for (String ck : f[1].split(",")) m.put(f[0] + " " + ck, f[2] + " " + f[3]);
        }
        return m;
    }

    /** `decodiff dump --engine llama.cpp` of {@code checkpoint} teacher-forced on {@code ref}, in a JVM of its own with llama.cpp from {@code lib}. */
    private static Path dump(Path lib, String checkpoint, Path ref, Path out) throws Exception {
        var java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        var r = Exec.run(root, List.of(java, "--add-modules", "jdk.incubator.vector", "--enable-native-access=ALL-UNNAMED",
                "-D" + LlamaCppHome.PROPERTY + "=" + lib, "-Ddecodiff.home=" + root, "-cp", System.getProperty("java.class.path"),
                "dev.decodiff.harness.cli.Main", "dump", "--engine", "llama.cpp", "--model", root.resolve("checkpoints/" + checkpoint).toString(),
                "--reference", ref.toString(), "--out", out.toString()));
        assertThat(r.code()).as("dump with " + lib + ": " + r.err()).isZero();
        return out;
    }

    private static JsonNode compare(Path a, Path b) throws Exception {
        var r = Cli.run("compare", a.toString(), b.toString(), "--json");
        assertThat(r.out()).as(r.toString()).startsWith("{");
        return JSON.readTree(r.out());
    }
}
