package dev.decodiff.harness.arch.gemma4;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.Gemma4Config;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.engine.LayerType;
import dev.decodiff.engine.ops.Format;
import dev.decodiff.engine.ops.Gemma4Ops;
import dev.decodiff.engine.ops.OpGraph;
import dev.decodiff.engine.ops.Precision;
import dev.decodiff.engine.ops.Rewire;
import dev.decodiff.harness.compare.ToleranceProfile;
import dev.decodiff.harness.compare.attribution.LocalError;
import dev.decodiff.harness.compare.attribution.OpAttribution;
import dev.decodiff.harness.report.Fmt;
import dev.decodiff.metal.TensorView;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * Local attribution of a candidate, step by step as its tensors arrive in causal order: every op of {@link OpGraph}
 * is recomputed exactly from the candidate's <b>own</b> inputs (its previous layer's out, its q/k_read/v_read, …) with
 * the checkpoint's weights, so a cell is charged only with what its op added; an op whose local error is over fp32
 * noise is then recomputed under each precision hypothesis ({@link Precision}), and the one that reproduces the
 * candidate to fp32 noise explains it. The reference plays no part here: drift inherited from upstream never shows
 * as a local error, whatever the tolerance.
 *
 * <p>Where the candidate lacks an op's inputs (a producer that records only {@code layers.N.out}), the op cannot be
 * measured on its own: the layer's out is then recomputed as a whole from the layer's input residual, with a shadow
 * KV cache built from the candidate's own layer inputs at every step, and the cell says so.
 */
public final class LocalAttribution extends OpAttribution {

    private final Gemma4Ops ops;
    private final Gemma4Config cfg;
    /** The checkpoint has affine-quantized (MLX) matrices, whose dequantization an engine may round. */
    private final boolean affine;

    private int[] stepTokens;
    private Map<String, float[]> have = new HashMap<>();
    private final Map<String, float[]> residuals = new HashMap<>();
    /** The rows each non-shared layer read at the previous step, by the read window's first position. */
    private final Map<String, Read> previousRead = new HashMap<>(), thisRead = new HashMap<>();
    /** Whole-layer attribution only: per precision, per layer, the K/V rows of every position so far. */
    private final Map<Precision, Map<Integer, Shadow>> shadows = new HashMap<>();
    private Boolean wholeLayers;
    /** Whole-layer mode: the current layer's out under each shadow precision (what its cell is judged against). */
    private Map<Precision, float[]> wholeOut = Map.of();

    private record Read(int lo, float[] rows) {}

    private static final class Shadow {
        float[] k = new float[0], v = new float[0];
        int positions;

        void append(float[] nk, float[] nv) {
            k = concat(k, nk);
            v = concat(v, nv);
        }
    }

    /**
     * @param everyCell measure every cell (a third-party candidate); false: only cells over tolerance (decodiff's own
     *                  engine, whose ops are these ops)
     */
    public LocalAttribution(Gemma4Model model, boolean everyCell) {
        this(new Gemma4Ops(model), model.config(), everyCell, null, false);
    }

    private LocalAttribution(Gemma4Ops ops, Gemma4Config cfg, boolean everyCell, Format stated, boolean reference) {
        super(everyCell, stated, reference);
        this.ops = ops;
        this.cfg = cfg;
        this.affine = ops.hasAffineMatrices();
    }

    /** This attribution for a candidate that states its dtype (a dump's producer.dtype; null or unknown: unstated). */
    @Override
    public LocalAttribution stating(String dtype) { return new LocalAttribution(ops, cfg, everyCell, classOf(dtype), reference); }

    /**
     * A twin that attributes the reference from the reference's own recorded inputs, with the same description of the
     * model: an op of the reference that the description does not reproduce — within the reference's stated precision
     * only — means the reference and the description disagree. Only cells over tolerance are attributed (those are the
     * cells whose error must be accounted for).
     */
    @Override
    public LocalAttribution forReference(String dtype) {
        var f = classOf(dtype);
        return new LocalAttribution(ops, cfg, false, f == null ? Format.F32 : f, true);
    }


    @Override
    public void beginStep(int step, int start, int length, int[] tokens) {
        this.step = step;
        this.start = start;
        this.T = length;
        this.stepTokens = java.util.Arrays.copyOfRange(tokens, start, start + length);
        have = new HashMap<>();
        residuals.clear();
        thisRead.clear();
    }

    /** The candidate's tensor of a point, in causal order; {@code failed}: its accumulated error is over tolerance. */
    @Override
    public void accept(String point, TensorView t, boolean failed) {
        String kind = CapturePoints.kindOf(point);
        int layer = CapturePoints.layerOf(point);
        if (OpGraph.node(kind) == null || layer >= cfg.numLayers()) return;
        float[] c = t.floatsToRead(); // a live candidate's private copy is kept as it is, not copied again: nothing here writes it
        have.put(point, c);
        if (CapturePoints.isCacheRead(kind) && layer >= 0 && !cfg.layer(layer).kvShared()) thisRead.put(point, new Read(readLo(layer), c));
        boolean out = kind.equals(CapturePoints.OUT);
        if (out && wholeLayers == null)
            wholeLayers = !have.containsKey(CapturePoints.layer(layer, CapturePoints.ATTN_OUT));
        // whole-layer mode: this step's layer under every precision, appended to its shadow cache, before judging it
        wholeOut = out ? shadowLayer(layer) : Map.of();
        if (everyCell || failed) {
            try {
                var e = attribute(point, kind, layer, c);
                if (e != null) errors.put(key(step, point), e);
            } catch (RuntimeException ex) {
                // a tensor of another shape than the model's (the comparison reports shapes): not measurable here
                errors.put(key(step, point), LocalError.unattributed(step, point, FP32.tolerance(point), "its inputs do not have the checkpoint's shapes"));
            }
        }
        prune(layer);
    }

    /** Closes the step: this step's reads become the history the next step's reads must continue. */
    @Override
    public void endStep() {
        // a step fed nothing (the reference side is fed only steps with cells over tolerance) leaves the older history,
        // whose rows are still the rows those positions hold
        if (!thisRead.isEmpty()) {
            previousRead.clear();
            previousRead.putAll(thisRead);
        }
        have = new HashMap<>();
    }


    // ---- one cell ----------------------------------------------------------------------------------------------

    private LocalError attribute(String point, String kind, int layer, float[] cand) {
        double tol = FP32.tolerance(point);
        List<String> inputs = OpGraph.inputs(cfg, point);
        if (kind.equals(CapturePoints.OUT) && !haveAll(inputs)) {
            var branches = withBranches(point, layer, cand, tol);
            return branches != null ? branches : wholeLayer(point, layer, cand, tol);
        }
        for (String in : inputs)
            if (!have.containsKey(in) && !(kind.equals(CapturePoints.OUT) && in.equals(CapturePoints.PLE)))
                return LocalError.unattributed(step, point, tol, "the candidate has no " + in + ", an input of this op");
        Function<Precision, float[]> op = switch (kind) {
            case CapturePoints.EMBED -> p -> ops.embed(stepTokens, p);
            case CapturePoints.PLE -> p -> ops.ple(stepTokens, have.get(CapturePoints.EMBED), p);
            case CapturePoints.Q -> p -> ops.qkv(layer, have.get(OpGraph.layerInput(layer)), T, start, p).q();
            case CapturePoints.K -> p -> ops.qkv(layer, have.get(OpGraph.layerInput(layer)), T, start, p).k();
            case CapturePoints.V -> p -> ops.qkv(layer, have.get(OpGraph.layerInput(layer)), T, start, p).v();
            case CapturePoints.K_READ, CapturePoints.V_READ -> null;
            case CapturePoints.ATTN_OUT -> null;
            case CapturePoints.MLP_OUT -> p -> ops.mlp(layer, residual(layer, p), T, p);
            case CapturePoints.MOE_OUT -> p -> ops.moe(layer, residual(layer, p), T, p);
            case CapturePoints.OUT -> p -> ops.layerOut(layer, residual(layer, p), have.get(CapturePoints.layer(layer, CapturePoints.MLP_OUT)),
                    have.get(CapturePoints.layer(layer, CapturePoints.MOE_OUT)), pleFor(p), T, p);
            case CapturePoints.FINAL_NORM -> p -> ops.finalNorm(have.get(inputs.get(0)), T, p);
            case CapturePoints.LOGITS -> p -> ops.logits(have.get(CapturePoints.FINAL_NORM), T, p);
            default -> null;
        };
        if (CapturePoints.isCacheRead(kind)) return cacheRead(point, kind, layer, cand, tol);
        if (kind.equals(CapturePoints.ATTN_OUT)) return attention(point, layer, cand, tol);
        if (op == null) return null;
        String in = layer < 0 ? null : OpGraph.layerInput(layer), attnOut = layer < 0 ? null : CapturePoints.layer(layer, CapturePoints.ATTN_OUT);
        switch (kind) {
            case CapturePoints.Q, CapturePoints.K, CapturePoints.V -> {
                variantOp = Rewire.Op.QKV;
                variants = (p, rw) -> {
                    var qkv = ops.qkv(layer, have.get(in), T, start, p, rw);
                    return kind.equals(CapturePoints.Q) ? qkv.q() : kind.equals(CapturePoints.K) ? qkv.k() : qkv.v();
                };
            }
            case CapturePoints.MLP_OUT -> {
                variantOp = Rewire.Op.MLP;
                variants = (p, rw) -> ops.mlp(layer, ops.postAttention(layer, have.get(in), have.get(attnOut), T, p, rw), T, p, rw);
            }
            case CapturePoints.MOE_OUT -> {
                variantOp = Rewire.Op.MOE;
                variants = (p, rw) -> ops.moe(layer, ops.postAttention(layer, have.get(in), have.get(attnOut), T, p, rw), T, p, rw);
            }
            default -> variants = null;
        }
        try {
            return judge(point, kind, cand, tol, op, null, String.join(", ", inputs.isEmpty() ? List.of("the tokens") : inputs), null);
        } finally {
            variants = null;
        }
    }

    /** Local error of an op, then — over fp32 noise — its precision hypotheses. rowMask: rows to judge (null: all). */
    private LocalError judge(String point, String kind, float[] cand, double tol, Function<Precision, float[]> op, boolean[] rowMask,
                             String from, String granularity) {
        var hs = hypotheses(kind);
        if (affine && !CapturePoints.isCacheRead(kind) && !kind.equals(CapturePoints.ATTN_OUT)) {
            // an MLX engine dequantizes in its scales' format; the checkpoint's exact op, in fp32
            hs = new ArrayList<>(hs);
            hs.add(Precision.EXACT.withScaleFormatDequant(true));
            hs.add(Precision.EXACT.withScaleFormatDequant(true).withActivations(Format.BF16));
        }
        return judge(point, kind, cand, tol, op, rowMask, from, granularity, hs);
    }

    /** The precision hypotheses that can touch an op of this kind (attention's: see {@link #attentionHypotheses}). */
    static List<Precision> hypotheses(String kind) {
        var out = new ArrayList<Precision>();
        if (CapturePoints.isCacheRead(kind)) {
            boolean keys = kind.equals(CapturePoints.K_READ);
            for (var s : List.of(Precision.KvStore.F16, Precision.KvStore.BF16, Precision.KvStore.Q8_0, Precision.KvStore.Q4_0))
                out.add(keys ? Precision.EXACT.withKeys(s) : Precision.EXACT.withValues(s));
            return out;
        }
        boolean matmul = !kind.equals(CapturePoints.EMBED) && !kind.equals(CapturePoints.FINAL_NORM);
        boolean gelu = kind.equals(CapturePoints.MLP_OUT) || kind.equals(CapturePoints.MOE_OUT) || kind.equals(CapturePoints.OUT);
        for (var f : List.of(Format.BF16, Format.F16)) out.add(Precision.EXACT.withActivations(f));
        if (gelu) out.add(Precision.EXACT.withGeluTable(true));
        if (matmul) {
            out.add(Precision.EXACT.withQ8Input(true));
            if (gelu) out.add(Precision.EXACT.withQ8Input(true).withGeluTable(true));
        }
        if (matmul)
            for (var f : List.of(Format.BF16, Format.F16)) {
                out.add(Precision.EXACT.withMatmulInput(f));
                if (gelu) out.add(Precision.EXACT.withMatmulInput(f).withGeluTable(true));
                if (kind.equals(CapturePoints.MOE_OUT) || kind.equals(CapturePoints.OUT))
                    out.add(Precision.EXACT.withExpertInput(f).withGeluTable(true));
                if (kind.equals(CapturePoints.OUT)) out.add(Precision.EXACT.withPleGateInput(f).withGeluTable(true));
            }
        return out;
    }

    /**
     * Attention's hypotheses, over the stores this step's cache reads showed (an f16 cache's keys read back as f16):
     * each of attention's kernels on them, and a half-precision framework.
     */
    private List<Precision> attentionHypotheses(int layer) {
        int src = cfg.layer(layer).kvSource();
        var kx = readExplained.get(CapturePoints.layer(src, CapturePoints.K_READ));
        var vx = readExplained.get(CapturePoints.layer(src, CapturePoints.V_READ));
        var k = kx == null ? Precision.KvStore.F32 : kx.keys();
        var v = vx == null ? Precision.KvStore.F32 : vx.values();
        var base = Precision.EXACT.withKeys(k).withValues(v);
        var out = new ArrayList<Precision>();
        if (!base.exact()) out.add(base);
        out.add(base.withAttention(Precision.Attention.GGML));
        out.add(base.withAttention(Precision.Attention.GGML_FLASH));
        for (var f : List.of(Format.BF16, Format.F16)) out.add(base.withActivations(f));
        return out;
    }

    // ---- the cache reads ---------------------------------------------------------------------------------------

    private int readLo(int layer) {
        int last = start + T - 1;
        return cfg.layer(layer).type() == LayerType.SLIDING ? Math.max(0, last - cfg.slidingWindow() + 1) : 0;
    }

    /**
     * What a cache read should hand back: on a KV-shared layer its source's read of this step; otherwise this step's
     * rows as they entered the cache, after the rows the previous step read (a cache keeps what it stored).
     */
    private LocalError cacheRead(String point, String kind, int layer, float[] cand, double tol) {
        var spec = cfg.layer(layer);
        int stride = spec.kvHeads() * spec.headDim();
        boolean keys = kind.equals(CapturePoints.K_READ);
        if (spec.kvShared()) {
            float[] src = have.get(CapturePoints.layer(spec.kvSource(), kind));
            if (src.length != cand.length)
                return new LocalError(step, point, LocalError.Status.UNEXPLAINED, Double.POSITIVE_INFINITY, tol, null, Double.NaN,
                        "layers." + spec.kvSource() + "." + kind + " (its KV source)", null);
            return judge(point, kind, cand, tol, p -> src, null, "layers." + spec.kvSource() + "." + kind + " (its KV source)", null);
        }
        int lo = readLo(layer), last = start + T - 1, C = last - lo + 1;
        if (cand.length != C * stride) return LocalError.unattributed(step, point, tol, "its read window is not the model's");
        float[] entered = have.get(CapturePoints.layer(layer, keys ? CapturePoints.K : CapturePoints.V));
        var prev = previousRead.get(point);
        float[] expect = new float[C * stride];
        boolean[] known = new boolean[C];
        boolean[] fresh = new boolean[C];
        for (int j = lo; j <= last; j++) {
            int r = j - lo;
            if (j >= start) {
                System.arraycopy(entered, (j - start) * stride, expect, r * stride, stride);
                known[r] = fresh[r] = true;
            } else if (prev != null && j >= prev.lo() && (j - prev.lo() + 1) * stride <= prev.rows().length) {
                System.arraycopy(prev.rows(), (j - prev.lo()) * stride, expect, r * stride, stride);
                known[r] = true;
            }
        }
        String from = "this step's " + (keys ? "k" : "v") + (lo < start ? " after the rows read at the previous step" : "");
        return judge(point, kind, cand, tol, p -> {
            float[] e = expect.clone();
            var store = keys ? p.keys() : p.values();
            if (store == Precision.KvStore.F32) return e;
            for (int r = 0; r < C; r++)
                if (fresh[r]) System.arraycopy(Gemma4Ops.stored(java.util.Arrays.copyOfRange(e, r * stride, (r + 1) * stride), stride, store), 0, e, r * stride, stride);
            return e;
        }, rowMask(known, stride), from, null);
    }

    // ---- attention -------------------------------------------------------------------------------------------

    private LocalError attention(String point, int layer, float[] cand, double tol) {
        var spec = cfg.layer(layer);
        int stride = spec.kvHeads() * spec.headDim(), qDim = cfg.numHeads() * spec.headDim();
        float[] q = have.get(CapturePoints.layer(layer, CapturePoints.Q));
        float[] kr = have.get(CapturePoints.layer(layer, CapturePoints.K_READ)), vr = have.get(CapturePoints.layer(layer, CapturePoints.V_READ));
        int src = spec.kvSource();
        float[] kNew = have.get(CapturePoints.layer(src, CapturePoints.K)), vNew = have.get(CapturePoints.layer(src, CapturePoints.V));
        int last = start + T - 1, lastLo = readLo(layer);
        int base = spec.type() == LayerType.SLIDING ? Math.max(0, start - cfg.slidingWindow() + 1) : 0;
        base = Math.min(base, lastLo);
        int n = last - base + 1;
        float[] k = new float[n * stride], v = new float[n * stride];
        boolean[] known = new boolean[n];
        for (int j = base; j <= last; j++) {
            int r = j - base;
            if (j >= lastLo && (j - lastLo + 1) * stride <= kr.length) {
                System.arraycopy(kr, (j - lastLo) * stride, k, r * stride, stride);
                System.arraycopy(vr, (j - lastLo) * stride, v, r * stride, stride);
                known[r] = true;
            } else if (j >= start && kNew != null && vNew != null) {
                System.arraycopy(kNew, (j - start) * stride, k, r * stride, stride);
                System.arraycopy(vNew, (j - start) * stride, v, r * stride, stride);
                known[r] = true;
            }
        }
        var kv = new Gemma4Ops.KeyValues(base, k, v, known);
        boolean[] rows = new boolean[T];
        ops.attention(layer, q, T, start, kv, Precision.EXACT, rows);
        int done = 0;
        for (boolean b : rows) if (b) done++;
        if (done == 0) return LocalError.unattributed(step, point, tol, "none of its rows' keys were captured");
        String gran = done < T ? "rows whose keys were captured (" + done + " of " + T + ")" : null;
        return judge(point, CapturePoints.ATTN_OUT, cand, tol, p -> ops.attention(layer, q, T, start, kv, p, null), rowMask(rows, qDim),
                "its q, k_read, v_read" + (T > 1 && base < lastLo ? " and this step's k, v" : ""), gran, attentionHypotheses(layer));
    }

    // ---- composite ops, for producers that record fewer points -----------------------------------------------

    /**
     * A layer's out when the side recorded its attention output but not every feed-forward branch (mlp.out without
     * moe.out, say): the missing branches recomputed from the post-attention residual, as one op with the residual adds
     * and norms. Null when the attention output or the layer's input is missing too.
     */
    private LocalError withBranches(String point, int layer, float[] cand, double tol) {
        String in = OpGraph.layerInput(layer), attn = CapturePoints.layer(layer, CapturePoints.ATTN_OUT);
        if (!have.containsKey(in) || !have.containsKey(attn)) return null;
        String mlpPoint = CapturePoints.layer(layer, CapturePoints.MLP_OUT), moePoint = CapturePoints.layer(layer, CapturePoints.MOE_OUT);
        float[] mlp = have.get(mlpPoint), moe = cfg.moe() ? have.get(moePoint) : null;
        var missing = new ArrayList<String>();
        if (mlp == null) missing.add(mlpPoint);
        if (cfg.moe() && moe == null) missing.add(moePoint);
        String gran = "the layer's " + String.join(" and ", missing.stream().map(CapturePoints::kindOf).toList())
                + " recomputed with its residual adds (not recorded)";
        return judge(point, CapturePoints.OUT, cand, tol, p -> ops.layerOut(layer, residual(layer, p),
                        mlp != null ? mlp : ops.mlp(layer, residual(layer, p), T, p),
                        !cfg.moe() ? null : moe != null ? moe : ops.moe(layer, residual(layer, p), T, p), pleFor(p), T, p), null,
                in + ", " + attn + (mlp != null ? ", " + mlpPoint : "") + (moe != null ? ", " + moePoint : ""), gran);
    }

    // ---- whole layers, for producers that record only the residual stream ------------------------------------

    private LocalError wholeLayer(String point, int layer, float[] cand, double tol) {
        String in = OpGraph.layerInput(layer);
        if (!have.containsKey(in)) return LocalError.unattributed(step, point, tol, "the candidate has no " + in + ", the layer's input");
        if (!Boolean.TRUE.equals(wholeLayers))
            return LocalError.unattributed(step, point, tol, "the candidate lacks some of the layer's inputs (" + String.join(", ", OpGraph.inputs(cfg, point)) + ")");
        precomputed = true;
        try {
            return judge(point, CapturePoints.OUT, cand, tol, wholeOut::get, null, in,
                    "the whole layer from its input residual, with a shadow cache (no attn.out is recorded here)");
        } finally {
            precomputed = false;
        }
    }

    /**
     * The layer's out under each shadow precision, recomputed from the candidate's own layer input, this step's K/V
     * appended to every shadow cache on the way; empty outside whole-layer mode or without the input.
     */
    private Map<Precision, float[]> shadowLayer(int layer) {
        if (!Boolean.TRUE.equals(wholeLayers)) return Map.of();
        String in = OpGraph.layerInput(layer);
        if (!have.containsKey(in)) return Map.of();
        var outs = new HashMap<Precision, float[]>();
        for (var p : shadowPrecisions()) {
            float[] o = layerFromInput(layer, have.get(in), p);
            if (o != null) outs.put(p, o);
        }
        return outs;
    }

    private static List<Precision> shadowPrecisions() {
        var l = new ArrayList<Precision>();
        l.add(Precision.EXACT);
        l.addAll(hypotheses(CapturePoints.OUT));
        return l;
    }

    /** The layer recomputed from its input residual over the shadow cache of precision p, this step appended to it. */
    private float[] layerFromInput(int layer, float[] x, Precision p) {
        var spec = cfg.layer(layer);
        var shadow = shadows.computeIfAbsent(p, k -> new HashMap<>());
        int src = spec.kvSource();
        var qkv = ops.qkv(layer, x, T, start, p);
        var sh = shadow.computeIfAbsent(src, k -> new Shadow());
        if (!spec.kvShared()) {
            if (sh.positions != start) return null;
            sh.append(qkv.k(), qkv.v());
            sh.positions = start + T;
        } else if (sh.positions != start + T) return null;
        float[] k = sh.k, v = sh.v;
        int stride = spec.kvHeads() * spec.headDim();
        boolean[] known = new boolean[k.length / stride];
        java.util.Arrays.fill(known, true);
        float[] attn = ops.attention(layer, qkv.q(), T, start, new Gemma4Ops.KeyValues(0, k, v, known), p, null);
        float[] r = ops.postAttention(layer, x, attn, T, p);
        float[] mlp = ops.mlp(layer, r, T, p);
        float[] moe = cfg.moe() ? ops.moe(layer, r, T, p) : null;
        return ops.layerOut(layer, r, mlp, moe, pleFor(p), T, p);
    }

    // ---- helpers -----------------------------------------------------------------------------------------------

    private float[] residual(int layer, Precision p) {
        String key = layer + "/" + p;
        return residuals.computeIfAbsent(key, k -> ops.postAttention(layer, have.get(OpGraph.layerInput(layer)),
                have.get(CapturePoints.layer(layer, CapturePoints.ATTN_OUT)), T, p));
    }

    private float[] pleFor(Precision p) {
        if (!cfg.hasPle()) return null;
        float[] ple = have.get(CapturePoints.PLE);
        if (ple != null) return ple;
        float[] embed = have.get(CapturePoints.EMBED);
        return embed == null ? ops.ple(stepTokens, ops.embed(stepTokens, p), p) : ops.ple(stepTokens, embed, p);
    }

    private boolean haveAll(List<String> inputs) {
        for (String in : inputs) if (!have.containsKey(in) && !in.equals(CapturePoints.PLE)) return false;
        return true;
    }

    /** Drops this step's tensors no later op reads (a layer's own tensors once the next layer starts). */
    private void prune(int layer) {
        if (layer < 1) return;
        have.keySet().removeIf(p -> {
            int l = CapturePoints.layerOf(p);
            if (l < 0 || l >= layer - 1) return false;
            if (p.equals(CapturePoints.layer(l, CapturePoints.OUT))) return l < layer - 1;
            String kind = CapturePoints.kindOf(p);
            boolean kv = kind.equals(CapturePoints.K) || kind.equals(CapturePoints.V) || CapturePoints.isCacheRead(kind);
            return !(kv && isKvSource(l));
        });
        residuals.keySet().removeIf(k -> Integer.parseInt(k.substring(0, k.indexOf('/'))) < layer);
    }

    private boolean isKvSource(int l) {
        for (var s : cfg.layers()) if (s.kvShared() && s.kvSource() == l) return true;
        return false;
    }

    private static boolean[] rowMask(boolean[] rows, int width) {
        boolean all = true;
        for (boolean b : rows) all &= b;
        if (all) return null;
        boolean[] m = new boolean[rows.length * width];
        for (int r = 0; r < rows.length; r++) if (rows[r]) java.util.Arrays.fill(m, r * width, (r + 1) * width, true);
        return m;
    }


    private static float[] concat(float[] a, float[] b) {
        float[] c = java.util.Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, c, a.length, b.length);
        return c;
    }
}
