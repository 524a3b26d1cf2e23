package dev.decodiff.harness.selftest;

import dev.decodiff.engine.Fault;
import dev.decodiff.engine.Gemma4Config;
import dev.decodiff.harness.compare.detect.Finding;

/**
 * The op variant bisect must name for a catalog fault, fixed from the fault's definition (and, where the name carries a
 * number, the checkpoint's config) — never from running the engine. {@code name} is matched as a prefix of the name
 * found, so the detail a detector adds after it ("(d = 32)", the keys of a window) does not have to be guessed.
 */
public record ExpectedVariant(String op, String name) {

    /** The variant to name, or null for the faults bisect does not run on (no numeric divergence, cache policies, an engine that throws). */
    public static ExpectedVariant of(Fault fault, Gemma4Config cfg, ExpectedCell cell) {
        return switch (fault) {
            case K_EQ_V_ROTATED_KEYS -> new ExpectedVariant("tensor wiring", "attn.v_read is attn.k_read");
            case SLIDING_WINDOW_OFF_BY_ONE -> new ExpectedVariant("cache window", "window off by +1");
            case RING_WRAP -> new ExpectedVariant("cache slots", "rows in the wrong slots");
            case DECODE_POSITION_OFF_BY_ONE -> new ExpectedVariant("rope", "position p+1");
            case ROPE_PROPORTIONAL_AS_PREFIX -> new ExpectedVariant("rope", "standard RoPE on a prefix");
            case V_NORM_MISSING -> new ExpectedVariant("norm", "v_norm absent");
            case GQA_MODULO -> new ExpectedVariant("attention heads", "h mod nkv");
            case KV_SHARED_FIRST_SOURCE -> cell instanceof ExpectedCell.Cell c && c.layer() != null
                    ? new ExpectedVariant("kv source", "layer " + c.layer() + " reads layer " + firstSameType(cfg, c.layer()) + "'s cache") : null;
            case LAYER_SCALAR_IGNORED -> new ExpectedVariant("layer_scalar", "not applied");
            case SOFTCAP_MISSING -> new ExpectedVariant("final soft-cap", "removed");
            case ATTENTION_SCALE_INV_SQRT_D -> new ExpectedVariant("attention", "the scores scaled by 1/√d (d = " + cfg.layer(0).headDim() + ")");
            case PREFILL_BIDIRECTIONAL -> new ExpectedVariant("attention", "no causal mask in prefill");
            case MLP_SILU -> new ExpectedVariant("mlp activation", "SiLU instead of gelu_pytorch_tanh");
            case MLP_GELU_ERF -> new ExpectedVariant("mlp activation", "exact (erf) GELU instead of gelu_pytorch_tanh");
            case ATTENTION_SOFTCAP_50 -> new ExpectedVariant("attention", "a soft-cap of 50 on the scores");
            case SLIDING_WINDOW_MINUS_TWO -> new ExpectedVariant("cache window", "window off by −2");
            case Q_NORM_MISSING -> new ExpectedVariant("norm", "q_norm absent");
            case K_NORM_ONE_PLUS -> new ExpectedVariant("norm", "k_norm with (1+w)");
            case VALUE_AFTER_K_NORM -> new ExpectedVariant("rewiring", "the value is taken after k_norm");
            case MOE_ROUTING_NOT_RENORMALISED -> new ExpectedVariant("rewiring", "the routing weights are not renormalised after top-k");
            case MOE_ROUTER_UNNORMED -> new ExpectedVariant("rewiring", "the router reads the un-normed residual");
            case MOE_EXPERT_SCALE_BY_RANK -> new ExpectedVariant("rewiring", "per_expert_scale is indexed by the expert's rank");
            case PLE_COMBINE_MISSING -> new ExpectedVariant("rewiring", "the 2^-½ combine is missing");
            case PLE_TABLE_SCALE_MISSING -> new ExpectedVariant("rewiring", "the PLE table's √P scale is missing");
            case PLE_SLICE_LAYER_MAJOR -> new ExpectedVariant("rewiring", "the gate's per-layer slice read layer-major");
            case LAYER_SCALAR_BEFORE_PLE -> new ExpectedVariant("rewiring", "layer_scalar is applied before the per-layer input branch");
            case DECODE_RECOMPUTE, PREFIX_REUSE_STALE_POSITION, SLIDING_TRUNCATE, CACHE_DROPS_FIRST_POSITION -> null;
        };
    }

    public boolean matches(Finding.Variant found) {
        return found != null && found.op().equals(op) && found.name().startsWith(name);
    }

    public String describe() { return op + " — " + name; }

    private static int firstSameType(Gemma4Config cfg, int layer) {
        for (int j = 0; j < cfg.firstKvShared(); j++) if (cfg.layer(j).type() == cfg.layer(layer).type()) return j;
        return -1;
    }
}
