package dev.decodiff.engine;

/**
 * The catalog faults a session runs with, resolved once from its {@link EngineOptions} so the hot path tests a
 * final boolean; the checks themselves stay inline in {@link InferenceSession} where each bug lives. Also holds
 * what a fault changes before the first step: which layer each KV-shared layer reads ({@link #kvSource}) and the
 * RoPE full layers apply under rope-proportional-as-prefix.
 *
 * @param kvSource per layer, the layer whose cache it reads (itself unless KV-shared; remapped under
 *                 kv-shared-first-source)
 * @param prefixRope the standard RoPE over the rotated prefix that full layers apply under
 *                   rope-proportional-as-prefix; null otherwise
 */
record FaultSwitches(boolean valuesFromKeys, boolean windowPlusOne, boolean ringWrap, boolean decodePosition,
                     boolean noVNorm, boolean gqaModulo, boolean noLayerScalar, boolean noSoftcap,
                     boolean recomputeHistory, boolean stalePosition, boolean slidingTruncate,
                     boolean dropFirstPosition, boolean scoreScale, boolean bidirectionalPrefill, boolean silu,
                     boolean geluErf, boolean scoreSoftcap, boolean windowMinusTwo, boolean noQNorm, boolean kNormOnePlus,
                     boolean valueAfterKNorm, boolean routingNotRenormalised, boolean routerUnnormed, boolean expertScaleByRank,
                     boolean pleNoCombine, boolean scalarBeforePle, boolean pleNoTableScale, boolean pleLayerMajor,
                     int[] kvSource, Rope prefixRope) {

    static FaultSwitches resolve(Gemma4Config cfg, EngineOptions options) {
        return new FaultSwitches(
                options.has(Fault.K_EQ_V_ROTATED_KEYS),
                options.has(Fault.SLIDING_WINDOW_OFF_BY_ONE),
                options.has(Fault.RING_WRAP),
                options.has(Fault.DECODE_POSITION_OFF_BY_ONE),
                options.has(Fault.V_NORM_MISSING),
                options.has(Fault.GQA_MODULO),
                options.has(Fault.LAYER_SCALAR_IGNORED),
                options.has(Fault.SOFTCAP_MISSING),
                options.has(Fault.DECODE_RECOMPUTE),
                options.has(Fault.PREFIX_REUSE_STALE_POSITION),
                options.has(Fault.SLIDING_TRUNCATE),
                options.has(Fault.CACHE_DROPS_FIRST_POSITION),
                options.has(Fault.ATTENTION_SCALE_INV_SQRT_D),
                options.has(Fault.PREFILL_BIDIRECTIONAL),
                options.has(Fault.MLP_SILU),
                options.has(Fault.MLP_GELU_ERF),
                options.has(Fault.ATTENTION_SOFTCAP_50),
                options.has(Fault.SLIDING_WINDOW_MINUS_TWO),
                options.has(Fault.Q_NORM_MISSING),
                options.has(Fault.K_NORM_ONE_PLUS),
                options.has(Fault.VALUE_AFTER_K_NORM),
                options.has(Fault.MOE_ROUTING_NOT_RENORMALISED),
                options.has(Fault.MOE_ROUTER_UNNORMED),
                options.has(Fault.MOE_EXPERT_SCALE_BY_RANK),
                options.has(Fault.PLE_COMBINE_MISSING),
                options.has(Fault.LAYER_SCALAR_BEFORE_PLE),
                options.has(Fault.PLE_TABLE_SCALE_MISSING),
                options.has(Fault.PLE_SLICE_LAYER_MAJOR),
                kvSources(cfg, options.has(Fault.KV_SHARED_FIRST_SOURCE)),
                options.has(Fault.ROPE_PROPORTIONAL_AS_PREFIX) ? firstFullRopeAsPrefix(cfg) : null);
    }

    /** The RoPE a layer applies to q and k: the model's for its type, unless a fault swaps the full layers'. */
    Rope rope(Gemma4Model model, LayerSpec spec) {
        return prefixRope != null && spec.type() == LayerType.FULL ? prefixRope : model.rope(spec.type());
    }

    /** Fault k-norm-one-plus's k_norm weights (1+w); the checkpoint's w otherwise. */
    float[] kNorm(float[] w) {
        if (!kNormOnePlus || w == null) return w;
        float[] p = new float[w.length];
        for (int j = 0; j < w.length; j++) p[j] = 1 + w[j];
        return p;
    }

    private static int[] kvSources(Gemma4Config cfg, boolean firstSource) {
        int[] src = new int[cfg.numLayers()];
        for (var spec : cfg.layers()) src[spec.index()] = spec.kvSource();
        if (firstSource) {
            for (var spec : cfg.layers()) {
                if (!spec.kvShared()) continue;
                for (int j = 0; j < cfg.firstKvShared(); j++)
                    if (cfg.layer(j).type() == spec.type()) { src[spec.index()] = j; break; }
            }
        }
        return src;
    }

    private static Rope firstFullRopeAsPrefix(Gemma4Config cfg) {
        for (var l : cfg.layers()) if (l.type() == LayerType.FULL) return Rope.standardOnPrefix(cfg.fullRope(), l.headDim());
        return null;
    }
}
