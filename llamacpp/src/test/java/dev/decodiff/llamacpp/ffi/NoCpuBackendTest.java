package dev.decodiff.llamacpp.ffi;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A llama.cpp without a CPU backend for this machine (as on a micro-architecture none of the package's
 * libggml-cpu-*.so variants runs on): one clear error, no crash. Run in a child JVM, since a JVM loads llama.cpp once.
 */
class NoCpuBackendTest {
    @TempDir
    Path tmp;

    /** The child: loads llama.cpp from the folder given and prints what happened. */
    public static void main(String[] args) {
        System.setProperty(LlamaCppHome.PROPERTY, args[0]);
        try {
            LlamaLibrary.get();
            System.out.println("LOADED");
        } catch (LlamaCppException e) {
            System.out.println("REFUSED " + e.getMessage());
        }
    }

    @Test
    void aLibraryFolderWithNoUsableCpuBackendIsRefusedWithTheCpuNamed() throws Exception {
        var home = LlamaCppTestSupport.requireHome();
        Assumptions.assumeTrue(home.kind() == LlamaCppHome.Kind.PREBUILT, "a native build links its CPU backend in");
        Path lib = Files.createDirectory(tmp.resolve("lib"));
        for (Path f : List.of(home.libllama(), home.libggml(), home.libggmlBase()))
            Files.copy(f, lib.resolve(f.getFileName()));
        // the headers beside it, as in the cache, for the layout probe
        Files.createSymbolicLink(tmp.resolve("src"), home.sources());
        var java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        var p = new ProcessBuilder(java, "--enable-native-access=ALL-UNNAMED", "-cp", System.getProperty("java.class.path"),
                NoCpuBackendTest.class.getName(), lib.toString()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(p.exitValue()).as(out).isZero();
        assertThat(out).contains("REFUSED").contains("no CPU backend in " + lib).contains("runs on this CPU").contains("GGML_NATIVE");
    }
}
