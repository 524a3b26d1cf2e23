package dev.decodiff.engine;

/**
 * Geometry of one decoder layer, resolved from config.json.
 *
 * @param kvSource for KV-shared layers, the earlier layer whose keys and values this one reads; else its own index
 */
public record LayerSpec(int index, LayerType type, int headDim, int kvHeads, int intermediate,
                        boolean kEqV, int kvSource) {
    public boolean kvShared() { return kvSource != index; }
}
