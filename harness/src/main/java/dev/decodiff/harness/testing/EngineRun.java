package dev.decodiff.harness.testing;

import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.Fault;
import dev.decodiff.engine.arch.LoadedModel;
import dev.decodiff.harness.arch.ArchitectureSupports;
import dev.decodiff.llamacpp.ffi.LlamaContext;

import java.nio.file.Path;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.LinkedHashSet;
import java.util.Set;
import java.util.TreeSet;

/**
 * An engine run to judge against a reference: a loaded checkpoint of any architecture, the catalog faults it runs with
 * (ids of its architecture's {@code faultNames()}) and, where its family's engine takes them, the engine options
 * (KV-cache types, matmul precision); or llama.cpp on a GGUF ({@link #llamaCpp(Path)}). The run itself happens in the
 * assertion, teacher-forced on the reference's tokens.
 *
 * @param options the engine options apart from faults; null where the family runs through the seam with its catalog
 *                faults only (and for a llama.cpp run)
 */
public record EngineRun(LoadedModel model, Set<String> faults, EngineOptions options, LlamaCpp llamaCpp) {
    /** llama.cpp running {@code gguf}; {@code options} null: the exact configuration (F32 K/V, flash attention off, 1 thread). */
    public record LlamaCpp(Path gguf, LlamaContext.Options options) {}

    public EngineRun {
        // sorted: a run's faults read the same in every message
        faults = faults == null ? Set.of() : java.util.Collections.unmodifiableSortedSet(new TreeSet<>(faults));
        if (options != null && !options.faults().isEmpty())
            throw new IllegalArgumentException("give faults by id (withFaults), not in the engine options: " + options.faults());
    }

    /** The model run as it is: no fault, its engine's exact defaults. */
    public static EngineRun of(LoadedModel model) {
        boolean tunable = ArchitectureSupports.of(model.architecture()).tunableEngine().isPresent();
        return new EngineRun(model, Set.of(), tunable ? EngineOptions.defaults() : null, null);
    }

    /** llama.cpp (set up by scripts/llamacpp.sh) on a GGUF file, in the exact configuration. */
    public static EngineRun llamaCpp(Path gguf) { return new EngineRun(null, Set.of(), null, new LlamaCpp(gguf, null)); }

    /** llama.cpp on a Hugging Face checkpoint folder, converted to an f32 GGUF on first use (cached). */
    public static EngineRun llamaCppOf(Path checkpoint) {
        return llamaCpp(dev.decodiff.harness.llamacpp.GgufCache.of(checkpoint, dev.decodiff.llamacpp.gguf.GgufOutputType.F32));
    }

    /** This llama.cpp run with other context options (KV-cache types, flash attention, threads). */
    public EngineRun withLlamaCppOptions(LlamaContext.Options o) {
        if (llamaCpp == null) throw new IllegalStateException("not a llama.cpp run: " + this);
        return new EngineRun(null, Set.of(), null, new LlamaCpp(llamaCpp.gguf(), o));
    }

    /**
     * This run with these catalog faults switched on (and no other), by id of the model's architecture's catalog; an
     * id outside it throws IllegalArgumentException naming the catalog.
     */
    public EngineRun withFaults(String... ids) {
        if (llamaCpp != null) throw new IllegalStateException("faults are decodiff's engine's; a llama.cpp run has none");
        var arch = model.architecture();
        var catalog = arch.faultNames();
        var set = new LinkedHashSet<String>();
        for (String id : ids) {
            if (!catalog.contains(id))
                throw new IllegalArgumentException("no fault '" + id + "' in " + arch.name() + "'s catalog"
                        + (catalog.isEmpty() ? " (it has none)" : "; it has: " + String.join(", ", catalog)));
            set.add(id);
        }
        return new EngineRun(model, set, options, null);
    }

    /** The same by Gemma 4's fault enum, which names its catalog ({@link Fault#id}). */
    public EngineRun withFaults(Fault... faults) { return withFaults(Arrays.stream(faults).map(Fault::id).toArray(String[]::new)); }

    /**
     * This run with other engine options (KV-cache types, matmul precision), where its family's engine takes them;
     * faults go through {@link #withFaults(String...)}.
     */
    public EngineRun withEngineOptions(EngineOptions o) {
        if (llamaCpp != null || options == null)
            throw new IllegalStateException(this + ": its engine runs exact fp32 through the plug-in seam and takes catalog faults only");
        return new EngineRun(model, faults, o, null);
    }

    /** The engine options with the faults switched on, for a family whose engine takes them (its catalog is {@link Fault}'s). */
    EngineOptions engineOptions() {
        var set = EnumSet.noneOf(Fault.class);
        for (String id : faults) set.add(Fault.byId(id));
        return options.withFaults(set);
    }

    @Override
    public String toString() {
        if (llamaCpp != null) return "llama.cpp run of " + llamaCpp.gguf();
        return "engine run of " + model.directory() + (faults.isEmpty() ? "" : " with faults " + String.join(", ", faults));
    }
}
