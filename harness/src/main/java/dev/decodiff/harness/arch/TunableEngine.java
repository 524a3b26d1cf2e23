package dev.decodiff.harness.arch;

import dev.decodiff.harness.live.ObserverCheck;
import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.Probe;
import dev.decodiff.engine.arch.LoadedModel;
import dev.decodiff.engine.arch.ModelSession;
import dev.decodiff.harness.bisect.BisectResult;
import dev.decodiff.harness.compare.StreamingCandidate;
import dev.decodiff.harness.compare.ToleranceProfile;
import dev.decodiff.harness.dump.DumpManifest;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.arch.gemma4.LiveCandidate;
import dev.decodiff.harness.selfcheck.SelfCheckResult;

import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.Set;

/**
 * An engine that takes decodiff's whole {@link EngineOptions} (KV-cache storage types, matmul precision, its fault
 * catalog), not catalog faults alone, and the runs built on it: the live compare and dump that honour --kv-cache and
 * --matmul, bisect's substitutions, selfcheck's cache-policy checks. Gemma 4's engine is one; an architecture without
 * one is run through the seam ({@link LoadedModel#newSession}), where those flags are refused.
 */
public interface TunableEngine {
    /** Loads the checkpoint for a run of at most {@code decodedTokens} tokens after the prompt (tables sized to it). */
    LoadedModel load(Path dir, long decodedTokens);

    /** Loads the checkpoint for a run of any length. */
    LoadedModel load(Path dir);

    /** Refuses, as bad input and before any session is built, options the checkpoint cannot honour. */
    void checkFits(LoadedModel model, EngineOptions options);

    /** A new conversation under these options; the probe (or null) sees every capture point. */
    ModelSession session(LoadedModel model, EngineOptions options, Probe probe);

    /** The provenance a dump of this model under these options records, the weights' quantization included. */
    DumpManifest.Producer producer(LoadedModel model, EngineOptions options, List<String> commandOptions);

    /** The bytes the KV cache holds per position under these options (its storage types), over every layer that keeps its own cache. */
    long kvBytesPerPosition(LoadedModel model, EngineOptions options);

    /** The engine live, teacher-forced on the reference's tokens, recording {@code points}. */
    StreamingCandidate live(LoadedModel model, EngineOptions options, DumpManifest reference, Set<String> points, ObserverCheck check);

    /** Bisect from compare's first divergent cell: local vs accumulated error, the healing substitution, the diagnosis. */
    BisectResult bisect(LoadedModel model, EngineOptions options, DumpReader reference, ToleranceProfile profile);

    /** Every self-consistency check on the engine's default tokens. */
    SelfCheckRun selfCheck(LoadedModel model, EngineOptions options);

    /**
     * `decodiff bench`'s view of a model this engine loaded (its streamed weights, their placement), sharing it: closing
     * the model closes the view. Empty where the engine has no bench of its own.
     */
    default Optional<BenchModel> benchModel(LoadedModel model) { return Optional.empty(); }

    /**
     * A session under these options that has read {@code prefix}, its state stored in the engine's own prefix cache:
     * the default bench's prefix reuse. Empty where the engine has no prefix cache.
     */
    default Optional<StoredPrefix> storedPrefix(LoadedModel model, EngineOptions options, int[] prefix) { return Optional.empty(); }

    /** What a selfcheck ran: its tokens, the prompt's share of them, the sliding window (0: none), the checks' results. */
    record SelfCheckRun(int[] tokens, int promptLength, int window, List<SelfCheckResult> results) {}
}
