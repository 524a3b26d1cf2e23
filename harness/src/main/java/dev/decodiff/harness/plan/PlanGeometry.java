package dev.decodiff.harness.plan;

import dev.decodiff.engine.LayerSpec;

import java.util.List;

/**
 * A checkpoint's geometry as the plan sizes its points: what its family's plug-in reads from config.json. Every point
 * the model records follows from it (per layer: its attention type, heads, head size and KV source).
 *
 * @param modelType     the text model type a dump of it records
 * @param slidingWindow the sliding layers' window W (0: none)
 * @param pleDim        the per-layer input size P (0: no per-layer inputs)
 * @param moe           whether the layers have a mixture-of-experts branch
 */
public record PlanGeometry(String modelType, int hidden, int numHeads, int vocabSize, int slidingWindow, int pleDim, boolean moe,
                           List<LayerSpec> layers) {
    public PlanGeometry {
        layers = List.copyOf(layers);
    }

    public int numLayers() { return layers.size(); }

    public LayerSpec layer(int i) { return layers.get(i); }

    public boolean hasPle() { return pleDim > 0; }
}
