package dev.decodiff.llamacpp;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.llamacpp.ffi.GgmlTensor;
import dev.decodiff.llamacpp.ffi.LlamaCppException;
import dev.decodiff.llamacpp.ffi.LlamaContext;

import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Predicate;

/**
 * The eval-callback side of a llama.cpp step: asks for the graph tensors that give the wanted capture points
 * ({@link GraphNames}), copies them out in decodiff's shapes, and rebuilds k_read/v_read from the cache views the
 * attention read. One instance serves every step of a run; {@link #take()} hands over a step's tensors. A step may
 * also replace named graph tensors with given values ({@link #substitute}): written in the callback right after the
 * node is computed (and captured, as computed), so every later node of the graph reads them.
 */
final class StepCapture implements LlamaContext.Tap {
    private final Predicate<String> wanted;
    private Map<String, LlamaCppRunner.Captured> tensors = new LinkedHashMap<>();
    private Map<String, String> notCaptured = new LinkedHashMap<>();
    private final Map<Integer, float[][]> kViews = new HashMap<>();
    private final Map<Integer, long[]> kShapes = new HashMap<>();
    private final Map<Integer, boolean[]> visible = new HashMap<>();
    /** Layers whose attention ran as flash attention this step (their V view is laid out like K). */
    private final java.util.Set<Integer> flashLayers = new java.util.HashSet<>();

    /** The points to replace in the next step, and those replaced so far in it. */
    private Map<String, float[]> substitutes = Map.of();
    private final java.util.Set<String> substituted = new java.util.HashSet<>();

    /** The architecture's graph mapping (Qwen3.5, the Llama family), or null for Gemma 4 (GraphNames' table). */
    private final ModelGraphNames graph;

    StepCapture(Predicate<String> wanted) { this(wanted, null); }

    StepCapture(Predicate<String> wanted, ModelGraphNames graph) {
        this.wanted = wanted;
        this.graph = graph;
    }

    /**
     * Replaces these points' graph tensors in the next step (row-major values in the point's shape). Only points the
     * graph names (GraphNames' table, logits excepted) can be replaced; k_read/v_read are views of the cache and a MoE
     * layer's mlp.out an unnamed product.
     */
    void substitute(Map<String, float[]> values) {
        for (String point : values.keySet()) {
            if (graph != null) {
                if (!graph.replaceableKinds().contains(CapturePoints.layerOf(point) < 0 ? point : CapturePoints.kindOf(point)))
                    throw new LlamaCppException("cannot substitute " + point + " in llama.cpp's " + graph.name() + " graph: only "
                            + String.join(", ", new java.util.TreeSet<>(graph.replaceableKinds())) + " are contiguous graph tensors decodiff can replace");
                continue;
            }
            var e = entryFor(point);
            if (e == null || e.shape() == GraphNames.Shape.LAST_ROW)
                throw new LlamaCppException("cannot substitute " + point + " in llama.cpp's graph: only " + substitutable() + " are named graph tensors decodiff can replace");
        }
        substitutes = Map.copyOf(values);
        substituted.clear();
    }

    private static GraphNames.Entry entryFor(String point) {
        int layer = CapturePoints.layerOf(point);
        String kind = CapturePoints.kindOf(point);
        for (var e : GraphNames.ENTRIES)
            if (e.kind().equals(kind) && e.perLayer() == (layer >= 0)) return e;
        return null;
    }

    private static String substitutable() {
        var kinds = new java.util.ArrayList<String>();
        for (var e : GraphNames.ENTRIES) if (e.shape() != GraphNames.Shape.LAST_ROW) kinds.add(e.kind());
        return String.join(", ", kinds);
    }

    @Override
    public boolean wants(GgmlTensor t) {
        if (graph != null) {
            String point = graph.point(t);
            // the embedding is always looked at: it opens each ubatch's graph (see take)
            if (point != null) return wanted.test(point) || substitutes.containsKey(point) || point.equals(CapturePoints.EMBED);
            var p = GraphNames.parse(t.name());
            return p.layer() >= 0 && (p.base().equals(GraphNames.KQ) || p.base().equals(GraphNames.KQ_SOFT_MAX) || p.base().equals(GraphNames.KQV))
                    && wantsReads(p.layer());
        }
        var p = GraphNames.parse(t.name());
        var e = GraphNames.entry(p);
        if (e.isPresent()) {
            String point = GraphNames.point(e.get(), p.layer());
            return wanted.test(point) || substitutes.containsKey(point) || e.get().kind().equals(CapturePoints.ATTN_OUT) && wantsReads(p.layer());
        }
        int moeLayer = denseMlpOfMoeLayer(t);
        if (moeLayer >= 0) return wanted.test(CapturePoints.layer(moeLayer, CapturePoints.MLP_OUT));
        if (p.layer() >= 0 && (p.base().equals(GraphNames.KQ) || p.base().equals(GraphNames.KQ_SOFT_MAX) || p.base().equals(GraphNames.KQV)))
            return wantsReads(p.layer());
        return false;
    }

    /** The layer whose unnamed dense-MLP product this is (a MoE layer's mul_mat with blk.N.ffn_down.weight), or -1. */
    private static int denseMlpOfMoeLayer(GgmlTensor t) {
        // reached only for names the table does not map: in a dense layer this product is "ffn_out-N", mapped by name
        var w = t.src(0);
        if (w == null || t.op() != GgmlTensor.OP_MUL_MAT) return -1;
        String n = w.name();
        if (!n.startsWith("blk.") || !n.endsWith(".ffn_down.weight")) return -1;
        try {
            return Integer.parseInt(n.substring(4, n.length() - ".ffn_down.weight".length()));
        } catch (NumberFormatException ex) {
            return -1;
        }
    }

    private boolean wantsReads(int layer) {
        return wanted.test(CapturePoints.layer(layer, CapturePoints.K_READ)) || wanted.test(CapturePoints.layer(layer, CapturePoints.V_READ));
    }

    @Override
    public void take(GgmlTensor t) {
        var p = GraphNames.parse(t.name());
        var e = graph != null ? java.util.Optional.<GraphNames.Entry>empty() : GraphNames.entry(p);
        if (graph != null) {
            String point = graph.point(t);
            if (point != null) {
                if (point.equals(CapturePoints.EMBED) && embedSeen) nextUbatch();
                if (point.equals(CapturePoints.EMBED)) embedSeen = true;
                // captured as llama.cpp computed it, then replaced for what follows
                if (wanted.test(point)) tensors.put(point, graph.capture(point, t));
                float[] replacement = substitutes.get(point);
                if (replacement != null && graph.carries(point, t)) {
                    t.overwrite(graph.toGraph(point, t, replacement));
                    substituted.add(point);
                }
                return;
            }
        }
        if (e.isPresent()) {
            String point = GraphNames.point(e.get(), p.layer());
            // captured as llama.cpp computed it (on whatever inputs it was given), then replaced for what follows
            if (wanted.test(point)) tensors.put(point, shaped(point, e.get().shape(), t));
            float[] replacement = substitutes.get(point);
            if (replacement != null) {
                t.overwrite(replacement);
                substituted.add(point);
            }
            var fa = t.src(0);
            if (e.get().kind().equals(CapturePoints.ATTN_OUT) && fa != null && fa.op() == GgmlTensor.OP_FLASH_ATTN_EXT && wantsReads(p.layer()))
                readFlashAttention(p.layer(), fa);
            return;
        }
        int moeLayer = graph != null ? -1 : denseMlpOfMoeLayer(t);
        if (moeLayer >= 0) {
            String point = CapturePoints.layer(moeLayer, CapturePoints.MLP_OUT);
            tensors.put(point, shaped(point, GraphNames.Shape.ROWS_2D, t));
            return;
        }
        int layer = p.layer();
        switch (p.base()) {
            case GraphNames.KQ -> readCache(layer, t.src(0), true);
            case GraphNames.KQ_SOFT_MAX -> readMask(layer, t.src(1));
            case GraphNames.KQV -> {
                readCache(layer, t.src(0), false);
                assembleReads(layer);
            }
            default -> { }
        }
    }

    /** A graph tensor in the capture point's row-major shape (ggml's ne reversed). */
    private static LlamaCppRunner.Captured shaped(String point, GraphNames.Shape shape, GgmlTensor t) {
        long[] ne = t.ne();
        float[] data = t.toFloats();
        int[] s = switch (shape) {
            case ROWS_2D -> new int[]{(int) (ne[1] * ne[2] * ne[3]), (int) ne[0]};
            case ROWS_3D -> new int[]{(int) (ne[2] * ne[3]), (int) ne[1], (int) ne[0]};
            case LAST_ROW -> new int[]{(int) ne[0]};
        };
        if (shape == GraphNames.Shape.LAST_ROW) {
            int v = (int) ne[0];
            data = java.util.Arrays.copyOfRange(data, data.length - v, data.length);
        } else if (ne[3] != 1 || (shape == GraphNames.Shape.ROWS_2D && ne[2] != 1)) {
            throw new LlamaCppException("graph tensor '" + t.name() + "' has ne " + java.util.Arrays.toString(ne)
                    + ", not the layout decodiff maps to " + point + "; the graph of this llama.cpp release differs from the table in GraphNames");
        }
        return new LlamaCppRunner.Captured(point, s, data);
    }

    /** The K (from kq) or V (from kqv) cache view the attention multiplied with, kept until the step's reads are built. */
    private void readCache(int layer, GgmlTensor view, boolean keys) {
        if (view == null) throw new LlamaCppException("graph node " + (keys ? GraphNames.KQ : GraphNames.KQV) + "-" + layer + " has no source 0");
        try {
            float[] values = view.toFloats();
            kViews.computeIfAbsent(layer, l -> new float[2][])[keys ? 0 : 1] = values;
            if (keys) kShapes.put(layer, view.ne());
        } catch (LlamaCppException e) {
            String why = "the " + (keys ? "K" : "V") + " cache could not be read back (" + e.getMessage() + ")";
            notCaptured.put(CapturePoints.layer(layer, keys ? CapturePoints.K_READ : CapturePoints.V_READ), why);
        }
    }

    /**
     * With flash attention there are no kq/kqv nodes: "kqv_out-il" is a reshape of ggml_flash_attn_ext(q, k, v, mask),
     * whose sources 1 and 2 are the K and V the op reads (for an F32 cache, the f16 copies llama.cpp casts them to)
     * and source 3 the mask. Both views are [d, cells, nkv]. They are intact here: the callback comes right after the op.
     */
    private void readFlashAttention(int layer, GgmlTensor fa) {
        flashLayers.add(layer);
        readCache(layer, fa.src(1), true);
        readCache(layer, fa.src(2), false);
        readMask(layer, fa.src(3));
        assembleReads(layer);
    }

    /** The cells the step's last position attends to: the finite entries of the mask's last row. */
    private void readMask(int layer, GgmlTensor mask) {
        if (mask == null) throw new LlamaCppException("graph node " + GraphNames.KQ_SOFT_MAX + "-" + layer + " has no mask (source 1)");
        long[] ne = mask.ne();
        float[] m = mask.toFloats();
        int cells = (int) ne[0];
        // rows beyond the step's tokens are padding (-inf everywhere); the last real row is the last with a finite entry
        int row = (int) (m.length / cells) - 1;
        while (row > 0 && !anyFinite(m, row * cells, cells)) row--;
        boolean[] v = new boolean[cells];
        for (int c = 0; c < cells; c++) v[c] = m[row * cells + c] != Float.NEGATIVE_INFINITY;
        visible.put(layer, v);
    }

    private static boolean anyFinite(float[] m, int from, int n) {
        for (int i = from; i < from + n; i++) if (m[i] != Float.NEGATIVE_INFINITY) return true;
        return false;
    }

    /**
     * k_read and v_read [C, nkv, d] from the cache views: K is mul_mat's src0 [d, cells, nkv] (row-major [nkv][cell][d]),
     * V is [cells, d, nkv] (row-major [nkv][d][cell]). The cache holds one cell per position from 0 (a single sequence,
     * a full-size sliding-window cache), so the visible cells in cell order are the positions read, in order.
     */
    private void assembleReads(int layer) {
        float[][] kv = kViews.remove(layer);
        long[] kne = kShapes.remove(layer);
        boolean[] vis = visible.remove(layer);
        String kPoint = CapturePoints.layer(layer, CapturePoints.K_READ), vPoint = CapturePoints.layer(layer, CapturePoints.V_READ);
        if (kv == null || kne == null || vis == null) {
            // without the K view (a cache type that cannot be decoded) the cells read cannot be located
            for (String pt : new String[]{kPoint, vPoint})
                if (wanted.test(pt)) notCaptured.putIfAbsent(pt, "the K cache view could not be read back, so the cells read are unknown");
            return;
        }
        int d = (int) kne[0], cells = (int) kne[1], heads = (int) kne[2];
        if (vis.length != cells)
            throw new LlamaCppException("layer " + layer + ": the mask covers " + vis.length + " cells but the K view " + cells
                    + "; the attention of this llama.cpp release differs from what GraphNames reads");
        int c = 0;
        for (boolean b : vis) if (b) c++;
        if (kv[0] != null && wanted.test(kPoint)) {
            float[] keys = gather(kv[0], false, vis, c, heads, d, layer);
            tensors.put(kPoint, new LlamaCppRunner.Captured(kPoint, new int[]{c, heads, d}, graph == null ? keys : graph.keysRead(keys, d)));
        }
        if (kv[1] != null && wanted.test(vPoint))
            tensors.put(vPoint, new LlamaCppRunner.Captured(vPoint, new int[]{c, heads, d},
                    gather(kv[1], !flashLayers.contains(layer), vis, c, heads, d, layer)));
    }

    /**
     * The visible cells' rows as [C, nkv, d]. {@code cellsInner}: the view is row-major [nkv][d][cell] (mul_mat's V,
     * contracted over cells), else [nkv][cell][d] (K, and flash attention's V).
     */
    private static float[] gather(float[] view, boolean cellsInner, boolean[] vis, int c, int heads, int d, int layer) {
        int cells = vis.length;
        if (view.length != (long) cells * d * heads)
            throw new LlamaCppException("layer " + layer + ": a cache view holds " + view.length + " values, expected " + cells + "×" + d + "×" + heads
                    + "; the attention of this llama.cpp release differs from what GraphNames reads");
        float[] out = new float[c * heads * d];
        int r = 0;
        for (int cell = 0; cell < cells; cell++) {
            if (!vis[cell]) continue;
            for (int h = 0; h < heads; h++)
                for (int j = 0; j < d; j++)
                    out[(r * heads + h) * d + j] = cellsInner ? view[(h * d + j) * cells + cell] : view[(h * cells + cell) * d + j];
            r++;
        }
        return out;
    }

    /**
     * A step llama.cpp splits into several ubatches (n_ubatch smaller than the step: one graph each, the states handed
     * from one to the next through its memory) emits every named tensor once per ubatch. The embedding opens each
     * graph, so a second one starts the next ubatch: the tensors so far are kept aside and joined in {@link #take}.
     */
    private final java.util.List<Map<String, LlamaCppRunner.Captured>> earlierUbatches = new java.util.ArrayList<>();
    private boolean embedSeen;

    private void nextUbatch() {
        earlierUbatches.add(tensors);
        tensors = new LinkedHashMap<>();
    }

    /**
     * The ubatches of a step as one: per-position rows concatenated in order; a state read (at the step's start) from
     * the first ubatch; a state written (at its end), k_read/v_read (for its last position) from the last.
     */
    private Map<String, LlamaCppRunner.Captured> joined() {
        if (earlierUbatches.isEmpty()) return tensors;
        earlierUbatches.add(tensors);
        var out = new LinkedHashMap<String, LlamaCppRunner.Captured>();
        for (var ub : earlierUbatches)
            for (var c : ub.values()) out.merge(c.point(), c, StepCapture::acrossUbatches);
        earlierUbatches.clear();
        return out;
    }

    private static LlamaCppRunner.Captured acrossUbatches(LlamaCppRunner.Captured first, LlamaCppRunner.Captured next) {
        String kind = CapturePoints.kindOf(first.point());
        if (kind.equals(CapturePoints.LINEAR_CONV_STATE_READ) || kind.equals(CapturePoints.LINEAR_STATE_READ)) return first;
        if (CapturePoints.isLinearState(kind) || CapturePoints.isCacheRead(kind) || kind.equals(CapturePoints.LOGITS)) return next;
        float[] data = java.util.Arrays.copyOf(first.data(), first.data().length + next.data().length);
        System.arraycopy(next.data(), 0, data, first.data().length, next.data().length);
        int[] shape = first.shape().clone();
        shape[0] += next.shape()[0];
        return new LlamaCppRunner.Captured(first.point(), shape, data);
    }

    /** This step's tensors and the points that could not be captured (with why); resets for the next step. */
    LlamaCppRunner.Step take(float[] logits) {
        if (!substituted.containsAll(substitutes.keySet())) {
            var missing = new java.util.TreeSet<>(substitutes.keySet());
            missing.removeAll(substituted);
            substitutes = Map.of();
            throw new NotReplacedException(missing);
        }
        substitutes = Map.of();
        substituted.clear();
        var step = new LlamaCppRunner.Step(joined(), logits, notCaptured);
        tensors = new LinkedHashMap<>();
        embedSeen = false;
        notCaptured = new LinkedHashMap<>();
        kViews.clear();
        kShapes.clear();
        visible.clear();
        flashLayers.clear();
        return step;
    }
}
