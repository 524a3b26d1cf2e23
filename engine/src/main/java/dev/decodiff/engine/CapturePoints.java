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

    /** Per-layer point suffixes, in causal order inside a layer. */
    public static final List<String> LAYER_SUFFIXES = List.of(Q, K, V, K_READ, V_READ, ATTN_OUT, MLP_OUT, MOE_OUT, OUT);

    private CapturePoints() {}

    /** Whether a point kind is a read-back from the cache (k_read or v_read), whose axis 0 is the read window. */
    public static boolean isCacheRead(String kind) { return kind.equals(K_READ) || kind.equals(V_READ); }

    /** Whether a point kind has a head axis: [rows, heads, d]. */
    public static boolean hasHeadAxis(String kind) {
        return kind.equals(Q) || kind.equals(K) || kind.equals(V) || isCacheRead(kind);
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
     * Rank of a point in causal order inside one step: embed, ple, then per layer q…out, then final_norm, logits.
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
