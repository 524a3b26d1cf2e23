package dev.decodiff.harness.arch;

import dev.decodiff.engine.EngineOptions;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.List;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

/**
 * `decodiff sweep` for one architecture: its scenario families, built from the model's boundaries, run on its engine
 * or on llama.cpp, minimized and reported.
 */
public interface SweepSupport {
    /**
     * The sweep as the command asks for it. The engine's pieces are suppliers, asked for only once the checkpoint and
     * the families have been checked, so that bad input is reported in the order the sweep meets it.
     *
     * @param families   the families to sweep (empty: all)
     * @param maxLength  the longest boundary, or null for the architecture's default
     * @param scenario   one scenario file to run instead of the sweep, or null
     * @param progress   whether to draw a progress bar (null: when stderr is a terminal)
     * @param kvCache    --kv-cache as given (K or K,V), or null
     * @param llamaCpp   whether to run llama.cpp instead of decodiff's engine (asked once the checkpoint is checked: a bad --engine is reported then)
     * @param gguf       the GGUF llama.cpp runs
     * @param threads    llama.cpp's threads
     * @param options    decodiff's engine options
     */
    record Request(Path dir, List<String> families, Integer maxLength, Path scenario, boolean minimize, Boolean progress,
                   boolean json, Path html, Path repro, String kvCache, boolean flashAttn, BooleanSupplier llamaCpp,
                   Supplier<Path> gguf, int threads, Supplier<EngineOptions> options) {}

    /** Runs the request, its report on {@code out}; true where every scenario passes (or is refused as designed). */
    boolean run(Request request, PrintWriter out);
}
