package dev.decodiff.llamacpp;

import dev.decodiff.engine.CapturePoints;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * The one table from llama.cpp's Gemma 4 graph (src/models/gemma4.cpp, src/llama-graph.cpp of the pinned release) to
 * decodiff's capture points. The graph names its tensors through {@code cb(tensor, name, il)}, which becomes
 * "name-il" for a layer's tensors and "name" for the model's. docs/engines/llama.cpp.md shows the same table.
 */
public final class GraphNames {
    /** How a graph tensor becomes a capture point: rows = the step's positions, except logits (the last row only). */
    public enum Shape { ROWS_2D, ROWS_3D, LAST_ROW }

    /** One mapping. {@code perLayer}: the graph name carries "-il". {@code where}: when it applies. */
    public record Entry(String graphName, String kind, boolean perLayer, Shape shape, String where) {}

    public static final List<Entry> ENTRIES = List.of(
            new Entry("inp_scaled", CapturePoints.EMBED, false, Shape.ROWS_2D, "token embedding × √H"),
            new Entry("inp_per_layer", CapturePoints.PLE, false, Shape.ROWS_3D, "per-layer inputs, before the permute to [P, T, L]"),
            new Entry("Qcur_pos", CapturePoints.Q, true, Shape.ROWS_3D, "queries after q_norm and RoPE"),
            new Entry("Kcur_pos", CapturePoints.K, true, Shape.ROWS_3D, "keys after k_norm and RoPE, as stored into the cache"),
            new Entry("Vcur_normed", CapturePoints.V, true, Shape.ROWS_3D, "values after the unweighted RMS norm, as stored"),
            new Entry("kqv_out", CapturePoints.ATTN_OUT, true, Shape.ROWS_2D, "attention output, heads concatenated, before wo"),
            new Entry("ffn_out", CapturePoints.MLP_OUT, true, Shape.ROWS_2D, "dense layers: the MLP output before ffn_post_norm"),
            new Entry("ffn_moe_out", CapturePoints.MOE_OUT, true, Shape.ROWS_2D, "MoE layers: the experts' weighted sum before ffn_post_norm_2"),
            new Entry("l_out", CapturePoints.OUT, true, Shape.ROWS_2D, "residual stream leaving the layer (after layer_output_scale)"),
            new Entry("result_norm", CapturePoints.FINAL_NORM, false, Shape.ROWS_2D, "after output_norm (every position is an output)"),
            new Entry("result_output", CapturePoints.LOGITS, false, Shape.LAST_ROW, "after the final soft-cap; the step's last position"));

    /**
     * The graph nodes k_read/v_read are read from: the K-cache view is source 0 of "kq-il" (mul_mat(k, q)), the
     * V-cache view source 0 of "kqv-il" (mul_mat(v, kq)), and the cells the last position sees are the finite entries
     * of the last row of the mask, source 1 of "kq_soft_max-il".
     */
    public static final String KQ = "kq", KQ_SOFT_MAX = "kq_soft_max", KQV = "kqv";

    /**
     * MoE layers leave their dense MLP output unnamed (build_ffn names "ffn_down" only with a bias): it is the
     * matrix product whose weight is this tensor, i.e. the node {@code mul_mat(blk.il.ffn_down.weight, ·)}.
     */
    public static String denseDownWeight(int layer) { return "blk." + layer + ".ffn_down.weight"; }

    private GraphNames() {}

    /** A graph tensor name split into its base name and layer (-1 for model-level names). */
    public record Parsed(String base, int layer) {}

    public static Parsed parse(String graphName) {
        int dash = graphName.lastIndexOf('-');
        if (dash > 0 && dash < graphName.length() - 1 && graphName.substring(dash + 1).chars().allMatch(Character::isDigit))
            return new Parsed(graphName.substring(0, dash), Integer.parseInt(graphName.substring(dash + 1)));
        return new Parsed(graphName, -1);
    }

    /** The table entry for a graph tensor name, if it is one decodiff captures. */
    public static Optional<Entry> entry(Parsed p) {
        for (var e : ENTRIES)
            if (e.graphName().equals(p.base()) && e.perLayer() == (p.layer() >= 0)) return Optional.of(e);
        return Optional.empty();
    }

    /** The capture point a table entry gives at a layer. */
    public static String point(Entry e, int layer) { return e.perLayer() ? CapturePoints.layer(layer, e.kind()) : e.kind(); }

    /** The graph names that can give a capture point (two for mlp.out: dense and MoE layers). */
    public static List<String> graphNamesFor(String point) {
        int layer = CapturePoints.layerOf(point);
        String kind = CapturePoints.kindOf(point);
        var names = new ArrayList<String>();
        for (var e : ENTRIES)
            if (e.kind().equals(kind) && e.perLayer() == (layer >= 0)) names.add(e.perLayer() ? e.graphName() + "-" + layer : e.graphName());
        if (kind.equals(CapturePoints.MLP_OUT)) names.add("mul_mat(" + denseDownWeight(layer) + ", ·)");
        if (CapturePoints.isCacheRead(kind)) names.addAll(List.of(KQ + "-" + layer, KQ_SOFT_MAX + "-" + layer, KQV + "-" + layer));
        return names;
    }
}
