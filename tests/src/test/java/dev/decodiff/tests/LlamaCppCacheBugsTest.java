package dev.decodiff.tests;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.llamacpp.ffi.LlamaCppHome;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Six of llamacpp/cache-bugs/, built into llama.cpp natively (scripts/llamacpp-native.sh --patch) and swept on
 * gemma4-tiny: the sweep's first failure is in the family and at the boundary manifest.tsv names (read off the
 * patched code, not off a run), its first cell is the one named there, and the repro folder's C program, built with gcc
 * against the patched library and run on its own, prints the disagreement. Two bugs in the sliding-window mask (seen
 * at W−1: a one-token step, a multi-token ubatch), seq_rm's position index and the cells' sequence bits parting (prefix
 * reuse), the batch splitter at a ubatch edge (n_ubatch 4), the K-shift (context shift), the mask of a two-sequence batch. Skipped unless the native build is already made.
 * Each llama.cpp runs in a JVM of its own (a JVM loads one llama.cpp).
 */
class LlamaCppCacheBugsTest {
    static final List<String> BUGS = List.of("31-swa-mask-decode-left-inclusive", "32-swa-mask-batch-rows-keep-left-edge",
            "33-seq-rm-shared-cell-keeps-owner", "35-ubatch-edge-repeats-token", "36-k-shift-not-applied", "39-mask-sequence-of-first-token");
    static Path root;

    @TempDir
    Path tmp;

    @BeforeAll
    static void nativeBuild() throws Exception {
        root = ReferenceCases.repoRoot();
        var r = Exec.run(root, List.of(root.resolve("scripts/llamacpp-native.sh").toString(), "--cached"));
        Assumptions.assumeTrue(r.code() == 0, "llama.cpp's native build is not made: run scripts/llamacpp-native.sh once (about 10 minutes)");
    }

    @Test
    void eachPatchIsFoundInItsFamilyAtItsBoundaryAndItsReproProgramDisagrees() throws Exception {
        var expected = manifest();
        for (String bug : BUGS) {
            var row = expected.get(bug);
            var built = Exec.run(root, List.of(root.resolve("scripts/llamacpp-native.sh").toString(), "--patch",
                    root.resolve("llamacpp/cache-bugs/" + bug + ".patch").toString()));
            assertThat(built.code()).as(bug + ": " + built.err()).isZero();
            Path lib = Path.of(built.out().strip());
            Path repro = tmp.resolve(bug);
            // the expected family alone, in every precision setting: clean llama.cpp passes it (LlamaCppSweepTest)
            var sweep = sweep(lib, repro, row[1]);
            assertThat(sweep.get("passed").asBoolean()).as(bug + " is found").isFalse();
            var ff = sweep.get("first_failing");
            assertThat(ff.get("family").asText() + " @ " + ff.get("boundary").asInt() + " (" + ff.get("settings").asText() + ")")
                    .as(bug + ": the first failure").isEqualTo(row[1] + " @ " + row[2] + " (" + row[0] + ")");
            var cell = new ObjectMapper().readTree(repro.resolve("cell.json").toFile());
            assertThat("step " + cell.get("step").asInt() + ", sequence " + cell.get("sequence").asInt() + ", position " + cell.get("position").asInt()
                    + ", " + cell.get("point").asText()).as(bug + ": the minimized failure's first cell").isEqualTo(row[3]);

            var build = Exec.run(repro, List.of("env", "LLAMA=" + lib.getParent(), "sh", repro.resolve("build.sh").toString()));
            assertThat(build.code()).as(bug + ": gcc " + build.err()).isZero();
            var run = Exec.run(repro, List.of(repro.resolve("repro").toString(), cell.get("model_file").asText()));
            assertThat(run.out()).as(bug + ": the repro program on its own, " + run.err()).contains("DISAGREE");
            assertThat(run.code()).isEqualTo(1);
        }
    }

    /** manifest.tsv: patch → {setting, family, boundary, cell}. */
    private static Map<String, String[]> manifest() throws Exception {
        var m = new HashMap<String, String[]>();
        for (String line : Files.readAllLines(root.resolve("llamacpp/cache-bugs/manifest.tsv"))) {
            if (line.isBlank() || line.startsWith("#")) continue;
            String[] f = line.split("\t");
            m.put(f[0], new String[]{f[1], f[2], f[3], f[4]});
        }
        return m;
    }

    /** `decodiff sweep --engine llama.cpp --family F --json --repro DIR` in a JVM of its own with llama.cpp from {@code lib}. */
    private static JsonNode sweep(Path lib, Path repro, String family) throws Exception {
        var java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        var r = Exec.run(root, List.of(java, "--add-modules", "jdk.incubator.vector", "--enable-native-access=ALL-UNNAMED",
                "-D" + LlamaCppHome.PROPERTY + "=" + lib, "-Ddecodiff.home=" + root, "-cp", System.getProperty("java.class.path"),
                "dev.decodiff.harness.cli.Main", "sweep", "--engine", "llama.cpp", "--model", root.resolve("checkpoints/gemma4-tiny").toString(),
                "--family", family, "--json", "--repro", repro.toString()));
        assertThat(r.code()).as("sweep with " + lib + ": " + r.err()).isEqualTo(1);
        return new ObjectMapper().readTree(r.out());
    }
}
