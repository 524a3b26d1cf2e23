package dev.decodiff.harness.plan;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.LayerSpec;

/** What each capture point holds, in transformers' terms (docs/dump-format.md §3), for the plan's readers. */
final class PointWords {
    private PointWords() {}

    static String what(String kind, LayerSpec spec) {
        return switch (kind) {
            case CapturePoints.EMBED -> "the token embedding entering layer 0 (Gemma 4: after the √hidden scaling)";
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
            case CapturePoints.LOGITS -> "the logits of the step's last position (after soft-capping, where the model caps)";
            case CapturePoints.ATTN_GATE -> "sigmoid of the gate half of q_proj (per head: query rows, then gate rows)";
            case CapturePoints.LINEAR_CONV_STATE_READ -> "the conv state at the step's start: the last K−1 conv inputs, oldest first (absent on the first step)";
            case CapturePoints.LINEAR_STATE_READ -> "the recurrent state at the step's start, fp32 [heads, key_dim, value_dim] (absent on the first step)";
            case CapturePoints.LINEAR_CONV_STATE -> "the conv state written at the step's end";
            case CapturePoints.LINEAR_STATE -> "the recurrent state written at the step's end, fp32";
            case CapturePoints.LINEAR_Q -> "linear-attention queries after the causal conv, SiLU, the head repeat and the l2 norm, before the 1/√dk scale";
            case CapturePoints.LINEAR_K -> "linear-attention keys, the same way";
            case CapturePoints.LINEAR_V -> "linear-attention values after the conv and SiLU";
            case CapturePoints.LINEAR_BETA -> "β = sigmoid(b) per token and head";
            case CapturePoints.LINEAR_DECAY -> "the log decay g = −exp(A_log)·softplus(a + dt_bias) per token and head";
            case CapturePoints.LINEAR_CORE_OUT -> "the delta-rule kernel's output, before the gated norm";
            case CapturePoints.LINEAR_OUT -> "the mixer output (out_proj after the gated norm), before the residual add";
            default -> "";
        };
    }
}
