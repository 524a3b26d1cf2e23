package dev.decodiff.harness.plan;

import java.util.List;

/**
 * One capture point of a plan, in causal order.
 *
 * @param layer    the decoder layer, or -1 for a model-level point
 * @param kind     the part after {@code layers.N.} ({@code attn.q}, …), or the name of a model-level point
 * @param shape    its axes (axis 0: T, or C on a read-back point; logits have none of those)
 * @param required whether local attribution needs it: the residual stream (embed, ple, each layer's out, final_norm,
 *                 logits) lets compare attribute a whole layer at a time; every other point is optional and narrows
 *                 attribution from the layer to its op
 * @param what     what it holds, in transformers' terms
 * @param read     for k_read/v_read, which positions it holds; null otherwise
 */
public record PlannedPoint(String name, int layer, String kind, List<Dim> shape, boolean required, String what, ReadBack read) {
    /** The shape's form as the format writes it, e.g. {@code [T, kv_heads, head_dim]}. */
    public String form() {
        return "[" + String.join(", ", shape.stream().map(Dim::label).toList()) + "]";
    }

    /** Whether axis 0 is the step's rows T. */
    public boolean hasRows() { return !shape.isEmpty() && shape.getFirst() instanceof Dim.Rows; }

    public boolean isRead() { return read != null; }
}
