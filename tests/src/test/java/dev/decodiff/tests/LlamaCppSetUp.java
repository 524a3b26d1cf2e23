package dev.decodiff.tests;

import dev.decodiff.llamacpp.ffi.LlamaCppHome;
import org.junit.jupiter.api.Assumptions;

import java.nio.file.Path;

/** The llama.cpp tests' one precondition: llama.cpp's library set up (scripts/llamacpp.sh), else they are skipped. */
final class LlamaCppSetUp {
    private LlamaCppSetUp() {}

    static void assumeAvailable() {
        Assumptions.assumeTrue(LlamaCppHome.configured() || LlamaCppHome.available(), "llama.cpp is not set up: run scripts/llamacpp.sh");
    }

    /** {@link #assumeAvailable}, then the repository root, made decodiff.home for the CLI run in-process. */
    static Path repoRootAsHome() {
        assumeAvailable();
        Path root = ReferenceCases.repoRoot();
        System.setProperty("decodiff.home", root.toString());
        return root;
    }
}
