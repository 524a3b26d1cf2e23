package dev.decodiff.harness.plan;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.LayerSpec;

/** What each capture point holds, in transformers' terms (docs/dump-format.md §3), for the plan's readers. */
final class PointWords {
    private PointWords() {}

    static String what(String kind, LayerSpec spec) {
        return switch (kind) {
            case CapturePoints.EMBED -> "the token embedding entering layer 0, after the √hidden scaling";
            case CapturePoints.PLE -> "the per-layer inputs of every layer (models with hidden_size_per_layer_input)";
            case CapturePoints.Q -> "queries after q_norm and RoPE";
            case CapturePoints.K -> "keys as they enter the cache: after k_norm and RoPE";
            case CapturePoints.V -> spec != null && spec.kEqV()
                    ? "values as they enter the cache: the raw k projection after v_norm (k_eq_v: no k_norm, no RoPE)"
                    : "values as they enter the cache: after v_norm";
            case CapturePoints.K_READ -> "the keys the step's last query reads from the cache, in position order";
            case CapturePoints.V_READ -> "the values the step's last query reads from the cache, in position order";
            case CapturePoints.ATTN_OUT -> "attention output, heads concatenated, before o_proj";
            case CapturePoints.MLP_OUT -> "dense MLP output, before post_feedforward_layernorm";
            case CapturePoints.MOE_OUT -> "mixture-of-experts branch output, before post_feedforward_layernorm_2";
            case CapturePoints.OUT -> "the residual stream leaving the layer (after layer_scalar)";
            case CapturePoints.FINAL_NORM -> "after the final norm";
            case CapturePoints.LOGITS -> "the logits of the step's last position, after soft-capping";
            default -> "";
        };
    }
}
