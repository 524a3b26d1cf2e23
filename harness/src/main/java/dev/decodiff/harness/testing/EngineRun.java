package dev.decodiff.harness.testing;

import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.Fault;
import dev.decodiff.engine.Gemma4Model;

import dev.decodiff.llamacpp.ffi.LlamaContext;

import java.nio.file.Path;
import java.util.EnumSet;
import java.util.Set;

/**
 * An engine run to judge against a reference: a loaded checkpoint and the options (faults) it runs with, or llama.cpp
 * on a GGUF ({@link #llamaCpp(Path)}). The run itself happens in the assertion, teacher-forced on the reference's tokens.
 */
public record EngineRun(Gemma4Model model, EngineOptions options, LlamaCpp llamaCpp) {
    /** llama.cpp running {@code gguf}; {@code options} null: the exact configuration (F32 K/V, flash attention off, 1 thread). */
    public record LlamaCpp(Path gguf, LlamaContext.Options options) {}

    public EngineRun(Gemma4Model model, EngineOptions options) { this(model, options, null); }

    public static EngineRun of(Gemma4Model model) { return new EngineRun(model, EngineOptions.defaults()); }

    /** llama.cpp (set up by scripts/llamacpp.sh) on a GGUF file, in the exact configuration. */
    public static EngineRun llamaCpp(Path gguf) { return new EngineRun(null, EngineOptions.defaults(), new LlamaCpp(gguf, null)); }

    /** llama.cpp on a Hugging Face checkpoint folder, converted to an f32 GGUF on first use (cached). */
    public static EngineRun llamaCppOf(Path checkpoint) {
        return llamaCpp(dev.decodiff.harness.llamacpp.GgufCache.of(checkpoint, dev.decodiff.llamacpp.gguf.GgufOutputType.F32));
    }

    /** This llama.cpp run with other context options (KV-cache types, flash attention, threads). */
    public EngineRun withLlamaCppOptions(LlamaContext.Options o) {
        if (llamaCpp == null) throw new IllegalStateException("not a llama.cpp run: " + this);
        return new EngineRun(null, options, new LlamaCpp(llamaCpp.gguf(), o));
    }

    public EngineRun withFaults(Fault... faults) {
        if (llamaCpp != null) throw new IllegalStateException("faults are decodiff's engine's; a llama.cpp run has none");
        Set<Fault> f = faults.length == 0 ? EnumSet.noneOf(Fault.class) : EnumSet.of(faults[0], faults);
        return new EngineRun(model, options.withFaults(f));
    }

    @Override
    public String toString() {
        if (llamaCpp != null) return "llama.cpp run of " + llamaCpp.gguf();
        return "engine run of " + model.directory() + (options.faults().isEmpty() ? "" : " with " + options.faults());
    }
}
