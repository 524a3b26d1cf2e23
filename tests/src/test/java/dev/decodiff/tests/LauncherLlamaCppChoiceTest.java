package dev.decodiff.tests;

import dev.decodiff.llamacpp.ffi.LlamaCppHome;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Which llama.cpp the launcher hands the JVM (scripts/llamacpp-choice.sh): an explicit $DECODIFF_LLAMACPP_LIB or
 * -Ddecodiff.llamacpp.lib in $DECODIFF_JAVA_OPTS wins (the launcher adds nothing that could override it); otherwise a
 * llama.cpp command gets the pinned prebuilt, and bench the native build when it is made.
 */
class LauncherLlamaCppChoiceTest {
    static final Path ROOT = ReferenceCases.repoRoot();

    private static String choice(Map<String, String> env, String... args) throws Exception {
        var script = ROOT.resolve("scripts/llamacpp-choice.sh");
        var cmd = new java.util.ArrayList<>(List.of("bash", "-c", ". '" + script + "'; llamacpp_choice \"$@\"", "choice", ROOT.toString()));
        cmd.addAll(List.of(args));
        var pb = new ProcessBuilder(cmd);
        pb.environment().remove(LlamaCppHome.ENV);
        pb.environment().remove("DECODIFF_JAVA_OPTS");
        pb.environment().putAll(env);
        var p = pb.start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(120, TimeUnit.SECONDS)).isTrue();
        assertThat(p.exitValue()).as(new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8)).isZero();
        return out.strip();
    }

    @Test
    void anExplicitLibraryFolderWinsOverThePinnedRelease() throws Exception {
        Assumptions.assumeTrue(LlamaCppHome.available() || LlamaCppHome.configured(), "llama.cpp is not set up: run scripts/llamacpp.sh");
        assertThat(choice(Map.of(LlamaCppHome.ENV, "/my/llama.cpp/build/bin"), "compare", "--engine", "llama.cpp")).isEmpty();
        assertThat(choice(Map.of("DECODIFF_JAVA_OPTS", "-Xmx2g -D" + LlamaCppHome.PROPERTY + "=/my/build/bin"), "bench", "--against", "llama.cpp")).isEmpty();
        assertThat(choice(Map.of(), "compare", "--engine", "llama.cpp"))
                .isEqualTo("-D" + LlamaCppHome.PROPERTY + "=" + LlamaCppHome.defaultCache().resolve("lib"));
        assertThat(choice(Map.of(), "compare", "--engine=llama.cpp"))
                .isEqualTo("-D" + LlamaCppHome.PROPERTY + "=" + LlamaCppHome.defaultCache().resolve("lib"));
    }

    @Test
    void benchTakesTheNativeBuildWhenItIsMade() throws Exception {
        Assumptions.assumeTrue(LlamaCppHome.available() || LlamaCppHome.configured(), "llama.cpp is not set up: run scripts/llamacpp.sh");
        var p = new ProcessBuilder(ROOT.resolve("scripts/llamacpp-native.sh").toString(), "--cached").start();
        String nativeLib = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        String expected = p.exitValue() == 0 ? nativeLib : LlamaCppHome.defaultCache().resolve("lib").toString();
        assertThat(choice(new HashMap<>(), "bench", "--against", "llama.cpp")).isEqualTo("-D" + LlamaCppHome.PROPERTY + "=" + expected);
        // only bench: compare keeps the pinned prebuilt its documented results were made with
        assertThat(choice(Map.of(), "compare", "--engine", "llama.cpp"))
                .isEqualTo("-D" + LlamaCppHome.PROPERTY + "=" + LlamaCppHome.defaultCache().resolve("lib"));
    }
}
