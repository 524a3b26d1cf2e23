package dev.decodiff.harness.arch.gemma4.sweep;

import dev.decodiff.engine.Gemma4Config;

import java.util.List;

/** A live engine that runs a scenario's schedules: decodiff's own ({@link EngineScenarios}) or llama.cpp ({@link LlamaCppScenarios}). */
public interface ScenarioEngine extends AutoCloseable {
    /** "decodiff engine (faults ring-wrap)", "llama.cpp v… (native build)". */
    String describe();

    Gemma4Config config();

    /** The noise between two paths to the same row on this engine in these settings: what the sweep tolerates. */
    double tolerance(Scenario.Settings settings);

    /** Whether the engine keeps a full-size sliding-window cache (llama.cpp's swa_full): then any cut is defined. */
    boolean keepsWholeHistory(Scenario.Settings settings);

    /** Whether only the logits decide a scenario (their tolerance is the one known); other rows then localize it. */
    default boolean logitsDecide() { return false; }

    /** Whether this engine takes several sequences in one step. */
    boolean batchesSequences();

    /** Runs one schedule of the scenario from an empty cache. */
    ScheduleRun run(Scenario scenario, List<Op> schedule);

    /**
     * A disagreement this engine's own arithmetic accounts for, shown by re-running the scenario without that
     * arithmetic: then a pass naming it ({@link Outcome.Pass#precision}). By default the failure stands.
     */
    default Outcome precision(Scenario scenario, Outcome.Fail fail) { return fail; }

    /**
     * A failure found without per-layer rows (an engine that captures them only on demand), localized to its first
     * cell by running the scenario again with them. By default it already is.
     */
    default Outcome.Fail localize(Scenario scenario, Outcome.Fail fail) { return fail; }

    /** The identity of the weights, for a repro: "gguf sha256 …" or "checkpoint config sha256 …, weights sha256 …". */
    String weightsIdentity();

    @Override
    default void close() {}
}
