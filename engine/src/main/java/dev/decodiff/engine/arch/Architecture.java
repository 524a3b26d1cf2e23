package dev.decodiff.engine.arch;

import java.nio.file.Path;
import java.util.List;

/**
 * One model family as decodiff runs it: which config.json model types it reads, how it loads a checkpoint, and the
 * capture points its forward offers, in causal order. The harness picks one by config.json's model_type
 * ({@link Architectures#of}) and then speaks to the loaded model only through {@link LoadedModel} and
 * {@link ModelSession}.
 */
public interface Architecture {
    /** A short human name ("Gemma 4", "Qwen3.5"). */
    String name();

    /** The text model types this architecture reads (config.json's model_type, or its text_config's). */
    List<String> modelTypes();

    /** Loads the checkpoint folder; a bad config or checkpoint throws {@code CheckpointException} with one line. */
    LoadedModel load(Path dir);

    /** Per-layer point kinds (the part after "layers.N.") this architecture can record, in causal order inside a layer. */
    List<String> layerPointKinds();

    /** The names of the switchable faults this architecture's engine can plant (may be empty). */
    default List<String> faultNames() { return List.of(); }

    /** What a catalog fault of {@link #faultNames} does, in one phrase (null where the architecture does not say). */
    default String faultDescription(String id) { return null; }
}
