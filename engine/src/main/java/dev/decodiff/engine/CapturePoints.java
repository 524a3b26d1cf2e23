package dev.decodiff.engine;

import java.util.List;

/** Capture-point names (a contract shared with other producers: docs/dump-format.md) and their causal order. */
public final class CapturePoints {
    public static final String EMBED = "embed";
    public static final String PLE = "ple";
    public static final String FINAL_NORM = "final_norm";
    public static final String LOGITS = "logits";

    // Per-layer point kinds: the part after "layers.N.".
    public static final String Q = "attn.q";
    public static final String K = "attn.k";
    public static final String V = "attn.v";
    /** The keys attention reads back from the cache this step, [C, nkv, d] over the read window. */
    public static final String K_READ = "attn.k_read";
    /** The values attention reads back from the cache this step, [C, nkv, d] over the read window. */
    public static final String V_READ = "attn.v_read";
    public static final String ATTN_OUT = "attn.out";
    public static final String MLP_OUT = "mlp.out";
    public static final String MOE_OUT = "moe.out";
    /** The layer's output (the residual stream after the layer). */
    public static final String OUT = "out";
    /** Gated attention (Qwen3.5): sigmoid of the per-head gate half of q_proj, [T, nh·d], multiplied into attn.out. */
    public static final String ATTN_GATE = "attn.gate";

    // Linear-attention (Gated DeltaNet) layers. The states are read at a step's start and written at its end, so a
    // broken prefill→decode hand-over shows at the state point itself, before anything computed from it.
    /** The conv state read at the step's start: the last K−1 conv inputs, [K−1, C], oldest first. */
    public static final String LINEAR_CONV_STATE_READ = "linear.conv_state_read";
    /** The recurrent state read at the step's start, [Hv, dk, dv], fp32. */
    public static final String LINEAR_STATE_READ = "linear.state_read";
    /** The conv state written at the step's end, [K−1, C]. */
    public static final String LINEAR_CONV_STATE = "linear.conv_state";
    /** Queries after the conv, SiLU, l2 norm and the head repeat, before the 1/√dk scale, [T, Hv, dk]. */
    public static final String LINEAR_Q = "linear.q";
    /** Keys after the conv, SiLU, l2 norm and the head repeat, [T, Hv, dk]. */
    public static final String LINEAR_K = "linear.k";
    /** Values after the conv and SiLU, [T, Hv, dv]. */
    public static final String LINEAR_V = "linear.v";
    /** β = sigmoid(b), [T, Hv]. */
    public static final String LINEAR_BETA = "linear.beta";
    /** g = −exp(A_log)·softplus(a + dt_bias), the log of the per-step decay, [T, Hv]. */
    public static final String LINEAR_DECAY = "linear.decay";
    /** The delta-rule kernel's output, before the gated norm, [T, Hv, dv]. */
    public static final String LINEAR_CORE_OUT = "linear.core_out";
    /** The recurrent state written at the step's end, [Hv, dk, dv], fp32. */
    public static final String LINEAR_STATE = "linear.state";
    /** The layer's mixer output (out_proj after the gated norm), [T, H]. */
    public static final String LINEAR_OUT = "linear.out";

    /**
     * Per-layer point suffixes of every architecture, in causal order inside a layer: a linear-attention layer's
     * points, then a full-attention layer's, then the feed-forward's and the layer output. A layer has one mixer, so
     * the two groups never interleave in one layer.
     */
    public static final List<String> LAYER_SUFFIXES = List.of(
            LINEAR_CONV_STATE_READ, LINEAR_STATE_READ, LINEAR_CONV_STATE, LINEAR_Q, LINEAR_K, LINEAR_V, LINEAR_BETA,
            LINEAR_DECAY, LINEAR_CORE_OUT, LINEAR_STATE, LINEAR_OUT,
            Q, ATTN_GATE, K, V, K_READ, V_READ, ATTN_OUT, MLP_OUT, MOE_OUT, OUT);

    /** Gemma 4's per-layer points, in its engine's slot order. */
    public static final List<String> GEMMA4_LAYER_SUFFIXES = List.of(Q, K, V, K_READ, V_READ, ATTN_OUT, MLP_OUT, MOE_OUT, OUT);

    /** Whether a point kind is a state read at a step's start or written at its end (not per token). */
    public static boolean isLinearState(String kind) {
        return kind.equals(LINEAR_CONV_STATE_READ) || kind.equals(LINEAR_CONV_STATE) || kind.equals(LINEAR_STATE_READ) || kind.equals(LINEAR_STATE);
    }

    private CapturePoints() {}

    /** Whether a point kind is a read-back from the cache (k_read or v_read), whose axis 0 is the read window. */
    public static boolean isCacheRead(String kind) { return kind.equals(K_READ) || kind.equals(V_READ); }

    /** Whether a point kind has a head axis: [rows, heads, d]. */
    public static boolean hasHeadAxis(String kind) {
        return kind.equals(Q) || kind.equals(K) || kind.equals(V) || isCacheRead(kind)
                || kind.equals(LINEAR_Q) || kind.equals(LINEAR_K) || kind.equals(LINEAR_V) || kind.equals(LINEAR_CORE_OUT);
    }

    public static String layer(int layer, String suffix) { return "layers." + layer + "." + suffix; }

    /** The layer index of a per-layer point name, or -1 for model-level points. */
    public static int layerOf(String point) {
        if (!point.startsWith("layers.")) return -1;
        int dot = point.indexOf('.', 7);
        if (dot < 0) return -1;
        try {
            return Integer.parseInt(point.substring(7, dot));
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    /** The part after "layers.N." (e.g. "attn.v_read"), or the whole name for model-level points. */
    public static String kindOf(String point) {
        int layer = layerOf(point);
        return layer < 0 ? point : point.substring(("layers." + layer + ".").length());
    }

    /**
     * Rank of a point in causal order inside one step: embed, ple, then per layer its points in {@link #LAYER_SUFFIXES}
     * order, then final_norm, logits.
     * Unknown producer-specific points sort after the known ones of their layer.
     */
    public static long causalRank(String point) {
        return switch (point) {
            case EMBED -> 0;
            case PLE -> 1;
            case FINAL_NORM -> Long.MAX_VALUE - 2;
            case LOGITS -> Long.MAX_VALUE - 1;
            default -> {
                int layer = layerOf(point);
                if (layer < 0) yield Long.MAX_VALUE - 3;
                int idx = LAYER_SUFFIXES.indexOf(kindOf(point));
                yield 2 + (long) layer * 100 + (idx < 0 ? 99 : idx);
            }
        };
    }
}
