package dev.decodiff.llamacpp.ffi;

import org.junit.jupiter.api.Assumptions;

/**
 * Whether the llama.cpp tests can run. Under ./run-tests (which sets llama.cpp up and exports DECODIFF_LLAMACPP_LIB)
 * a missing llama.cpp is a failure; a plain `mvn test` without it skips them and says how to run them.
 */
public final class LlamaCppTestSupport {
    private LlamaCppTestSupport() {}

    public static LlamaCppHome requireHome() {
        if (LlamaCppHome.configured()) return LlamaCppHome.locate();
        Assumptions.assumeTrue(LlamaCppHome.available(),
                "llama.cpp is not set up: run scripts/llamacpp.sh (./run-tests does) to run the llama.cpp tests");
        return LlamaCppHome.locate();
    }
}
