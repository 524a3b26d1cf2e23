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
