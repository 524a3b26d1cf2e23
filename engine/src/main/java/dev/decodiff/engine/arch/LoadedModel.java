package dev.decodiff.engine.arch;

import dev.decodiff.engine.Probe;

import java.nio.file.Path;
import java.util.List;

/** A loaded checkpoint of some {@link Architecture}: what the harness needs to run it live and to describe it. */
public interface LoadedModel extends AutoCloseable {
    Architecture architecture();

    Path directory();

    /** The text model type (e.g. qwen3_5_moe_text), as dumps record it. */
    String modelType();

    int numLayers();

    int vocabSize();

    /** The longest sequence the config allows (max_position_embeddings). */
    int maxPositions();

    /** The per-layer point kinds layer i records, in causal order. */
    List<String> layerPoints(int layer);

    /** Every point name this model records in a step, in causal order (model-level and per-layer). */
    default List<String> pointNames() {
        var out = new java.util.ArrayList<String>();
        out.add(dev.decodiff.engine.CapturePoints.EMBED);
        for (int i = 0; i < numLayers(); i++)
            for (String k : layerPoints(i)) out.add(dev.decodiff.engine.CapturePoints.layer(i, k));
        out.add(dev.decodiff.engine.CapturePoints.FINAL_NORM);
        out.add(dev.decodiff.engine.CapturePoints.LOGITS);
        return out;
    }

    /** A new conversation; the probe (or null) sees every capture point. */
    ModelSession newSession(Probe probe);

    /**
     * A new conversation with catalog faults switched on, by id ({@link Architecture#faultNames}); an id outside
     * this architecture's catalog throws IllegalArgumentException naming the catalog.
     */
    default ModelSession newSession(Probe probe, java.util.Collection<String> faults) {
        if (faults.isEmpty()) return newSession(probe);
        throw new IllegalArgumentException(architecture().name() + " has no fault catalog; drop " + String.join(", ", faults));
    }

    String configSha256();

    String weightsSha256();

    @Override
    void close();
}
