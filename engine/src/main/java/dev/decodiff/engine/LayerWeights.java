package dev.decodiff.engine;

import dev.decodiff.metal.WeightMatrix;

/** The weights of one decoder layer. Absent parts (KV-shared k/v, k_eq_v v, MoE, PLE) are null. */
public record LayerWeights(
        float[] inputNorm, float[] postAttentionNorm, float[] preFeedforwardNorm, float[] postFeedforwardNorm,
        float layerScalar,
        WeightMatrix q, WeightMatrix k, WeightMatrix v, WeightMatrix o,
        float[] qBias, float[] kBias, float[] vBias, float[] oBias,
        float[] qNorm, float[] kNorm,
        WeightMatrix gate, WeightMatrix up, WeightMatrix down,
        Moe moe,
        WeightMatrix pleGate, WeightMatrix pleProjection, float[] plePostNorm) {

    /**
     * Router and experts of the MoE branch; each expert's gate [Im, H], up [Im, H] and down [H, Im] are views of the
     * stacked tensors (Hugging Face's fused gate_up_proj, or MLX's switch_glu gate_proj / up_proj).
     */
    public record Moe(WeightMatrix router, float[] routerScale, float[] perExpertScale,
                      WeightMatrix[] gate, WeightMatrix[] up, WeightMatrix[] down,
                      float[] preFeedforwardNorm2, float[] postFeedforwardNorm1, float[] postFeedforwardNorm2) {}
}
