package dev.decodiff.llamacpp;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.llamacpp.ffi.GgmlTensor;
import dev.decodiff.llamacpp.ffi.LlamaContext;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;

/**
 * The eval-callback side of one llama_decode of an explicit batch, for the cache sweep: every named per-row graph
 * tensor ({@link GraphNames}: embed, ple, q, k, v, attn.out, mlp.out, moe.out, out, final_norm), cut into rows and
 * tied to the batch entry each row came from. llama.cpp splits a batch into ubatches of n_ubatch tokens, in batch
 * order with one unified cache ({@code split_simple}), and computes one graph per ubatch; each graph starts with
 * "inp_scaled", so a row's batch entry is the rows of the graphs before it plus its row in its own graph.
 * k_read/v_read are not cut out here: the cells of a cache shared by several sequences, cut and copied, are in no
 * position order the graph shows. Every batch entry must be an output (final_norm has output rows only).
 */
public final class RowCapture implements LlamaContext.Tap {
    /** One row: the batch entry it belongs to, the capture point, its values. */
    public record Row(int entry, String point, float[] data) {}

    private final List<Row> rows = new ArrayList<>();
    /** Graph tensors captured besides the capture points, by base name: their rows' point is the graph name ("ffn_moe_logits-4"). */
    private final Set<String> extra;

    public RowCapture() { this(Set.of()); }

    /** @param extra graph tensors of one row per token (base names, e.g. "ffn_moe_logits") captured too, under their graph name */
    public RowCapture(Set<String> extra) { this.extra = Set.copyOf(extra); }
    /** Batch entries covered by the graphs before the current one, and the current graph's token count. */
    private int base, current;

    @Override
    public boolean wants(GgmlTensor t) {
        var p = GraphNames.parse(t.name());
        if (extra.contains(p.base())) return true;
        return GraphNames.entry(p).filter(e -> e.shape() != GraphNames.Shape.LAST_ROW).isPresent();
    }

    @Override
    public void take(GgmlTensor t) {
        var p = GraphNames.parse(t.name());
        if (extra.contains(p.base())) {
            long[] ne = t.ne();
            int tokens = (int) (ne[1] * ne[2] * ne[3]);
            float[] data = t.toFloats();
            int width = data.length / Math.max(1, tokens);
            for (int r = 0; r < tokens; r++) rows.add(new Row(base + r, t.name(), Arrays.copyOfRange(data, r * width, (r + 1) * width)));
            return;
        }
        var e = GraphNames.entry(p).orElse(null);
        if (e == null || e.shape() == GraphNames.Shape.LAST_ROW) return;
        long[] ne = t.ne();
        int tokens = (int) (e.shape() == GraphNames.Shape.ROWS_3D ? ne[2] * ne[3] : ne[1] * ne[2] * ne[3]);
        if (e.kind().equals(CapturePoints.EMBED)) {
            // a new ubatch's graph
            base += current;
            current = tokens;
        }
        float[] data = t.toFloats();
        int width = data.length / Math.max(1, tokens);
        String point = GraphNames.point(e, p.layer());
        for (int r = 0; r < tokens; r++) rows.add(new Row(base + r, point, Arrays.copyOfRange(data, r * width, (r + 1) * width)));
    }

    /** The rows of the decode call just made, and a fresh start for the next one. */
    public List<Row> take() {
        var out = List.copyOf(rows);
        rows.clear();
        base = 0;
        current = 0;
        return out;
    }
}
