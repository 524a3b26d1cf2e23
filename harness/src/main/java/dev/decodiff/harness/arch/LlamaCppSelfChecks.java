package dev.decodiff.harness.arch;

import dev.decodiff.harness.selfcheck.LlamaCppSelfCheck;
import dev.decodiff.llamacpp.ffi.LlamaContext;

import java.nio.file.Path;
import java.util.function.BiFunction;

/** `selfcheck --engine llama.cpp` for one architecture: what its checks need of the checkpoint's config. */
public interface LlamaCppSelfChecks {
    /** Reads the checkpoint's config.json (a bad one, or another model type, throws with one line) and plans the checks. */
    Planned plan(Path dir);

    /**
     * The planned checks.
     *
     * @param tokenCount the tokens the checks run (the context is sized to them)
     * @param window     the sliding window the report states (0: none)
     * @param checks     the checks on a GGUF under these context options
     */
    record Planned(int tokenCount, int window, BiFunction<Path, LlamaContext.Options, LlamaCppSelfCheck> checks) {}
}
