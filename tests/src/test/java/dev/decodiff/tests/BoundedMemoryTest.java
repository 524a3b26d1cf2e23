package dev.decodiff.tests;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.StringJoiner;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A live compare and a dump hold one captured tensor at a time, not a step: both run a 4,000-token prompt through
 * the bundled gemma4-tiny in a JVM with a heap of {@value #HEAP} — far less than the step's 78 MB of captured
 * tensors on top of what the engine itself needs for that prompt. Holding the step (as both once did) runs out
 * of heap there (measured: the whole-step compare needed more than 112 MB, the streaming one less than 64 MB).
 *
 * <p>The reference is made by the engine itself: this tests memory, not correctness (the committed transformers
 * dumps test that), so a match is all the compare must say. The compare runs without the probe-free twin session
 * of the observer check, which would double the engine's own share of the heap.
 */
class BoundedMemoryTest {
    static final String HEAP = "88m";
    static final int PROMPT = 4000;

    @TempDir
    Path tmp;

    @Test
    void aLongPromptDumpsAndComparesLiveInASmallHeap() throws Exception {
        Path root = ReferenceCases.repoRoot();
        Path model = root.resolve("checkpoints/gemma4-tiny");
        var tokens = new StringJoiner(",");
        tokens.add("2");
        for (int i = 1; i < PROMPT; i++) tokens.add(Integer.toString(4 + (int) ((i * 7919L) % 1000)));
        Path dump = tmp.resolve("long-prompt");

        var d = fork(root, "dump", "--model", model.toString(), "--tokens", tokens.toString(), "-n", "2", "--out", dump.toString());
        assertThat(d.code()).as(d.toString()).isZero();
        long stepBytes = Files.size(dump.resolve("step-0000.safetensors"));
        assertThat(stepBytes).as("the prefill step's captured tensors outweigh the heap").isGreaterThan(64L << 20);

        var c = fork(root, "compare", dump.toString(), "--model", model.toString(), "--no-observer-check", "--json");
        assertThat(c.code()).as(c.toString()).isZero();
        var j = new ObjectMapper().readTree(c.out());
        assertThat(j.get("verdict").asText()).isEqualTo("match");
        assertThat(j.get("steps").get("compared").asInt()).isEqualTo(2);
    }

    record Run(int code, String out, String err) {
        @Override
        public String toString() { return "exit " + code + "\n--- stdout\n" + out + "--- stderr\n" + err; }
    }

    /** decodiff's CLI in a fresh JVM with a {@value #HEAP} heap, on this test's class path. */
    static Run fork(Path root, String... args) throws IOException, InterruptedException {
        var cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Xmx" + HEAP, "--add-modules", "jdk.incubator.vector", "--enable-native-access=ALL-UNNAMED",
                "-Ddecodiff.home=" + root, "-cp", System.getProperty("java.class.path"), "dev.decodiff.harness.cli.Main"));
        cmd.addAll(List.of(args));
        var out = Files.createTempFile("decodiff-out", ".txt");
        var err = Files.createTempFile("decodiff-err", ".txt");
        try {
            var p = new ProcessBuilder(cmd).redirectOutput(out.toFile()).redirectError(err.toFile()).start();
            if (!p.waitFor(10, TimeUnit.MINUTES)) {
                p.destroyForcibly();
                throw new AssertionError("decodiff " + String.join(" ", args).substring(0, 40) + "… did not finish in 10 minutes");
            }
            return new Run(p.exitValue(), Files.readString(out), Files.readString(err));
        } finally {
            Files.deleteIfExists(out);
            Files.deleteIfExists(err);
        }
    }
}
