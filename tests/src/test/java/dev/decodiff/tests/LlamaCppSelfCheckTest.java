package dev.decodiff.tests;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.llamacpp.ffi.LlamaCppHome;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * `selfcheck --engine llama.cpp`: clean llama.cpp agrees with itself along every path (its fp16 GELU flips stay
 * within the check's tolerance); llama.cpp with a decode-only porting bug (porting-bugs/09: single-token steps rotate
 * full layers without the proportional RoPE's factors; built natively, skipped without the native build) fails
 * decode-vs-prefill exactly where the bug first acts — the first decode position (the prompt is 2W+3 = 19 tokens) of
 * the first full layer (2), at attn.q — with no reference at all.
 *
 * <p>On Qwen3.5 the checks are about the conv and recurrent states: clean llama.cpp reads back, bit for bit, every
 * state it wrote, and the prompt then decode, one-token steps, calls of 3 and 65 and n_ubatch of 3 and 65 (llama.cpp
 * splitting one call itself; 65 crosses the delta rule's 64-token chunk) agree with one pass. A patch that writes back
 * the conv state one column stale (porting-bugs/15) is caught by the state audit at the first state read that follows a
 * write — step 1 of one-token steps, position 1 — in the first linear-attention layer (0) at its first point, the conv
 * state read; and every split that hands a state over disagrees with one pass.
 */
class LlamaCppSelfCheckTest {
    static final ObjectMapper JSON = new ObjectMapper();
    static Path root;

    @BeforeAll
    static void setUp() {
        root = LlamaCppSetUp.repoRootAsHome();
    }

    @Test
    void cleanLlamaCppPassesEveryCheckOnBothBundledCheckpointsItRuns() throws Exception {
        for (String ck : List.of("gemma4-tiny", "gemma4-tiny-moe")) {
            var r = Cli.run("selfcheck", "--engine", "llama.cpp", "--model", root.resolve("checkpoints/" + ck).toString(), "--json");
            assertThat(r.code()).as(r.toString()).isZero();
            var j = JSON.readTree(r.out());
            assertThat(j.get("verdict").asText()).isEqualTo("pass");
            assertThat(j.get("checks")).hasSize(5);
        }
    }

    @Test
    void cleanLlamaCppHandsQwen35sStatesOverIntactAlongEverySplit() throws Exception {
        for (String ck : List.of("qwen35-tiny-llamacpp", "qwen35-tiny-moe-llamacpp")) {
            var r = Cli.run("selfcheck", "--engine", "llama.cpp", "--model", root.resolve("checkpoints/" + ck).toString(), "--json");
            assertThat(r.code()).as(r.toString()).isZero();
            var j = JSON.readTree(r.out());
            assertThat(j.get("verdict").asText()).isEqualTo("pass");
            var names = new java.util.ArrayList<String>();
            for (var c : j.get("checks")) names.add(c.get("check").asText());
            assertThat(names).containsExactly("state-reads-match-writes", "decode-vs-prefill", "one-token-steps", "chunked-prefill-3",
                    "chunked-prefill-65", "ubatch-3", "ubatch-65", "instrumented-vs-plain");
            assertThat(j.get("prompt_length").asInt()).isEqualTo(70);
        }
    }

    @Test
    void aConvStateWrittenBackStaleIsCaughtAtTheFirstStateReadAfterAWrite() throws Exception {
        var r = withPatch("15-conv-state-keeps-stale-column", "--model", root.resolve("checkpoints/qwen35-tiny-llamacpp").toString());
        assertThat(r.code()).as(r.err()).isEqualTo(1);
        JsonNode checks = JSON.readTree(r.out()).get("checks");
        JsonNode audit = checks.get(0);
        assertThat(audit.get("check").asText()).isEqualTo("state-reads-match-writes");
        assertThat(audit.get("passed").asBoolean()).isFalse();
        assertThat(audit.get("position").asInt()).isEqualTo(1);
        assertThat(audit.get("point").asText()).isEqualTo("layers.0.linear.conv_state_read");
        for (var c : checks)
            if (!c.get("check").asText().equals("instrumented-vs-plain"))
                assertThat(c.get("passed").asBoolean()).as(c.get("check").asText() + " hands a state over").isFalse();
        // llama.cpp's own ubatch split hands the state over at position 3 (n_ubatch 3) and 65
        for (var c : checks) {
            if (c.get("check").asText().equals("ubatch-3")) assertThat(c.get("position").asInt()).isEqualTo(3);
            if (c.get("check").asText().equals("ubatch-65")) assertThat(c.get("position").asInt()).isEqualTo(65);
        }
    }

    /** selfcheck --engine llama.cpp --json in a JVM of its own, with a porting bug built in (skipped without the native build). */
    private static Exec withPatch(String bug, String... args) throws Exception {
        var cached = Exec.run(root, List.of(root.resolve("scripts/llamacpp-native.sh").toString(), "--cached"));
        Assumptions.assumeTrue(cached.code() == 0, "llama.cpp's native build is not made: run scripts/llamacpp-native.sh once (about 10 minutes)");
        var built = Exec.run(root, List.of(root.resolve("scripts/llamacpp-native.sh").toString(), "--patch",
                root.resolve("llamacpp/porting-bugs/" + bug + ".patch").toString()));
        assertThat(built.code()).as(built.err()).isZero();
        var java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        var cmd = new java.util.ArrayList<>(List.of(java, "--add-modules", "jdk.incubator.vector", "--enable-native-access=ALL-UNNAMED",
                "-D" + LlamaCppHome.PROPERTY + "=" + built.out().strip(), "-Ddecodiff.home=" + root, "-cp", System.getProperty("java.class.path"),
                "dev.decodiff.harness.cli.Main", "selfcheck", "--engine", "llama.cpp", "--json"));
        cmd.addAll(List.of(args));
        return Exec.run(root, cmd);
    }

    @Test
    void aDecodeOnlyBugFailsDecodeVsPrefillAtTheFirstDecodePositionOfTheFirstFullLayer() throws Exception {
        var cached = Exec.run(root, List.of(root.resolve("scripts/llamacpp-native.sh").toString(), "--cached"));
        Assumptions.assumeTrue(cached.code() == 0, "llama.cpp's native build is not made: run scripts/llamacpp-native.sh once (about 10 minutes)");
        var bug = Exec.run(root, List.of(root.resolve("scripts/llamacpp-native.sh").toString(), "--patch",
                root.resolve("llamacpp/porting-bugs/09-decode-rope-drops-proportional.patch").toString()));
        assertThat(bug.code()).as(bug.err()).isZero();
        var java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        var r = Exec.run(root, List.of(java, "--add-modules", "jdk.incubator.vector", "--enable-native-access=ALL-UNNAMED",
                "-D" + LlamaCppHome.PROPERTY + "=" + bug.out().strip(), "-Ddecodiff.home=" + root, "-cp", System.getProperty("java.class.path"),
                "dev.decodiff.harness.cli.Main", "selfcheck", "--engine", "llama.cpp", "--json"));
        assertThat(r.code()).as(r.err()).isEqualTo(1);
        JsonNode j = JSON.readTree(r.out());
        assertThat(j.get("prompt_length").asInt()).isEqualTo(19);
        JsonNode first = j.get("checks").get(0);
        assertThat(first.get("check").asText()).isEqualTo("decode-vs-prefill");
        assertThat(first.get("passed").asBoolean()).isFalse();
        assertThat(first.get("position").asInt()).isEqualTo(19);
        assertThat(first.get("point").asText()).isEqualTo("layers.2.attn.q");
    }
}
