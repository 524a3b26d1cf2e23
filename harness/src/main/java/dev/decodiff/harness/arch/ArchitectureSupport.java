package dev.decodiff.harness.arch;

import dev.decodiff.engine.arch.Architecture;
import dev.decodiff.engine.arch.LoadedModel;
import dev.decodiff.harness.compare.CellStats;
import dev.decodiff.harness.compare.attribution.OpAttribution;
import dev.decodiff.harness.compare.detect.Finding;
import dev.decodiff.harness.compare.detect.ReferenceHistory;
import dev.decodiff.harness.dump.StepTensors;

import java.nio.file.Path;
import java.util.Optional;

/**
 * The harness side of an architecture plug-in: what the generic commands ask of one model family beyond the engine
 * seam ({@link Architecture}, {@link LoadedModel}). Each architecture has one, found by {@link ArchitectureSupports#of};
 * a method's default is the answer for a family that does not offer the feature, and the generic code then says so.
 */
public interface ArchitectureSupport {
    /** The engine-side plug-in this one completes. */
    Architecture architecture();

    /**
     * Local attribution over a loaded model of this architecture: its ops recomputed from a side's own inputs. Null
     * where the family's ops are not described for recomputation (every cell is then judged by accumulated error).
     *
     * @param everyCell measure every cell (a third-party candidate); false: only cells over tolerance
     * @param gguf      the GGUF llama.cpp runs (its stored matrices may become a precision hypothesis), or null
     */
    default OpAttribution attribution(LoadedModel model, boolean everyCell, Path gguf) { return null; }

    /**
     * Bisect's detectors on the culprit cell of another engine's local output (llama.cpp fed the reference's inputs
     * and cache history): the finding that names the bug, or null where none fits or the architecture has none.
     */
    default Finding explainCulprit(Path checkpoint, CellStats cell, StepTensors ref, StepTensors local, ReferenceHistory history) { return null; }

    /** The window W of {@code layer} where it is a sliding-window layer of this model, else 0 (a layer it lacks included). */
    default int slidingWindow(LoadedModel model, int layer) { return 0; }

    /**
     * The engine that takes decodiff's whole engine options (--kv-cache, --matmul); empty where the architecture runs
     * through the seam alone, with its catalog faults only.
     */
    default Optional<TunableEngine> tunableEngine() { return Optional.empty(); }

    /** What `inspect` says of a checkpoint folder of this architecture; empty where it has no description of its own. */
    default Optional<CheckpointDescriber> checkpointDescriber() { return Optional.empty(); }

    /** `decodiff sweep` on a checkpoint of this architecture; empty where its engine has no scenario families. */
    default Optional<SweepSupport> sweep() { return Optional.empty(); }

    /** `selfcheck --engine llama.cpp` on a checkpoint of this architecture; empty where there are no such checks. */
    default Optional<LlamaCppSelfChecks> llamaCppSelfChecks() { return Optional.empty(); }

    /** `decodiff plan --model`'s reading of this family's config.json; empty where the plan takes its shapes from a reference only. */
    default Optional<PlanGeometryReader> planGeometry() { return Optional.empty(); }

    /** `decodiff selftest` of this family's whole catalog on its tunable engine; empty where it has none. */
    default Optional<EngineSelfTest> engineSelfTest() { return Optional.empty(); }

    /** `decodiff selftest` of this family's catalog run through the seam: where each fault must be found; empty where it has none. */
    default Optional<CatalogExpectations> catalogExpectations() { return Optional.empty(); }

    /** `decodiff bench`'s view of this family's model where the family has a decode bench of its own; empty where it has none. */
    default Optional<BenchModel.Loader> benchModel() { return Optional.empty(); }

    /** The engine's own model type a JUnit {@code @Checkpoint} parameter may name for this family; empty where it has none. */
    default Optional<OwnModel<?>> ownModel() { return Optional.empty(); }
}
