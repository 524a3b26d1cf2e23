package dev.decodiff.harness.compare.attribution;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.ops.Format;
import dev.decodiff.engine.ops.MoeRouting;
import dev.decodiff.engine.ops.Precision;
import dev.decodiff.engine.ops.Rewire;
import dev.decodiff.harness.compare.ToleranceProfile;
import dev.decodiff.harness.report.Fmt;
import dev.decodiff.metal.TensorView;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * Local attribution of one side, whatever the architecture: a subclass recomputes each op of its model from the side's
 * own recorded inputs (its one description of the model's ops) and hands the op, as a function of the precision, to
 * {@link #judge}; here the op's local error is measured, then — over fp32 noise — its precision hypotheses, the
 * near-tie roundings and routing decisions, the envelope of the side's precision class and its detection floor, and
 * known variants inside an envelope. Comparison, the accounting and the reports speak only to this class.
 */
public abstract class OpAttribution {
    /** Local errors at or below this are fp32 noise: the fp32 defaults, whatever profile judges the accumulated error. */
    protected static final ToleranceProfile FP32 = ToleranceProfile.defaults();

    protected final boolean everyCell;
    /** The precision class the side states it computes in (its producer's dtype): F32, BF16, F16; null when unstated. */
    protected final Format stated;
    /** This instance attributes the reference: only its stated precision may explain its ops. */
    protected final boolean reference;
    /** The precision class whose envelope first judged a cell of this side (an unstated side keeps to it). */
    protected Format envelopeClass;
    protected final Map<String, LocalError> errors = new LinkedHashMap<>();
    protected int step, start, T;
    /** The precision that explained each cache read or state read (what the side's store demonstrably holds), kept across steps. */
    protected final Map<String, Precision> readExplained = new HashMap<>();
    /** The op being judged hands back precomputed outcomes (the whole-layer shadows): it cannot be sampled again. */
    protected boolean precomputed;
    /** The op being judged under a rewiring (its known porting variants), where the op has them; null otherwise. */
    protected java.util.function.BiFunction<Precision, Rewire, float[]> variants;
    protected Rewire.Op variantOp;

    protected OpAttribution(boolean everyCell, Format stated, boolean reference) {
        this.everyCell = everyCell;
        this.stated = stated;
        this.reference = reference;
    }

    /** This attribution for a candidate that states its dtype (a dump's producer.dtype; null or unknown: unstated). */
    public abstract OpAttribution stating(String dtype);

    /**
     * A twin that attributes the reference from the reference's own recorded inputs, with the same description of the
     * model: an op of the reference that the description does not reproduce — within the reference's stated precision
     * only — means the reference and the description disagree. Only cells over tolerance are attributed.
     */
    public abstract OpAttribution forReference(String dtype);

    public abstract void beginStep(int step, int start, int length, int[] tokens);

    /** The side's tensor of a point, in causal order; {@code failed}: its accumulated error is over tolerance. */
    public abstract void accept(String point, TensorView t, boolean failed);

    /** Closes the step. */
    public abstract void endStep();

    /**
     * Whether a point kind is an input of a later step's op (a state written, a cache read that the next read extends):
     * the reference side is fed those on every step, not only on steps with a cell over tolerance, so the first step
     * that goes wrong can be judged from the step before it.
     */
    public boolean carriesAcrossSteps(String kind) { return false; }

    public boolean measuresEveryCell() { return everyCell; }

    /** What a report says about this attribution's own inputs (a GGUF's stored matrix it refused to use, …); none by default. */
    public List<String> notes() { return List.of(); }

    public LocalError error(int step, String point) { return errors.get(key(step, point)); }

    public Map<String, LocalError> errors() { return errors; }

    protected static String key(int step, String point) { return step + "/" + point; }

    /** The precision class a producer's dtype names: float32 → F32, bfloat16 → BF16, float16 → F16; else null. */
    protected static Format classOf(String dtype) {
        if (dtype == null) return null;
        return switch (dtype.toLowerCase(java.util.Locale.ROOT)) {
            case "float32", "fp32", "f32" -> Format.F32;
            case "bfloat16", "bf16" -> Format.BF16;
            case "float16", "fp16", "f16", "half" -> Format.F16;
            default -> null;
        };
    }

    /** Local error of an op, then — over fp32 noise — the given precision hypotheses. rowMask: rows to judge (null: all). */
    protected LocalError judge(String point, String kind, float[] cand, double tol, Function<Precision, float[]> given, boolean[] rowMask,
                             String from, String granularity, List<Precision> hypotheses) {
        var every = hypotheses;
        if (reference) hypotheses = hypotheses.stream().filter(h -> h.activations() == stated && stated != Format.F32 && onlyActivations(h)).toList();
        float[] exact = given.apply(Precision.EXACT);
        if (exact == null || exact.length != cand.length) return LocalError.unattributed(step, point, tol, "its inputs do not have the checkpoint's shapes");
        double local = rel(cand, exact, rowMask);
        if (local <= tol) return new LocalError(step, point, LocalError.Status.EXACT, local, tol, null, Double.NaN, from, granularity);
        var plain = judgeWith(point, kind, cand, tol, given, rowMask, from, granularity, hypotheses, exact, local, null);
        if (reference && plain.unexplained()) {
            // not an explanation (the reference states what it computed in), but what a porter needs to know
            for (var h : every) {
                if (hypotheses.contains(h)) continue;
                float[] out = given.apply(h);
                if (out != null && out.length == cand.length && rel(cand, out, rowMask) <= tol)
                    return new LocalError(step, point, LocalError.Status.UNEXPLAINED, local, tol, REPRODUCED_BY + h.describe(),
                            rel(cand, out, rowMask), from, granularity);
            }
        }
        if (plain.status() != LocalError.Status.UNEXPLAINED || precomputed) return plain;
        // a discrete decision at a near-tie: an MoE router's k-th expert that a lower-precision engine picked otherwise
        var flips = routingFlips(given, cand, rowMask, local);
        if (flips.isEmpty()) return plain;
        var flipped = java.util.Set.copyOf(flips.keySet());
        Function<Precision, float[]> op = q -> MoeRouting.withRoutingFlipped(flipped, () -> given.apply(q));
        float[] exactFlipped = op.apply(Precision.EXACT);
        double localFlipped = rel(cand, exactFlipped, rowMask);
        String routed = routingWords(flips, local);
        if (localFlipped <= tol) return new LocalError(step, point, LocalError.Status.PRECISION, local, tol, routed, localFlipped, from, granularity);
        var withFlips = judgeWith(point, kind, cand, tol, op, rowMask, from, granularity, hypotheses, exactFlipped, localFlipped, routed);
        return withFlips.status() == LocalError.Status.PRECISION ? withFlips : plain;
    }

    /** The hypotheses, near-tie roundings and envelope for an op whose local error (against {@code exact}) is over noise. */
    private LocalError judgeWith(String point, String kind, float[] cand, double tol, Function<Precision, float[]> op, boolean[] rowMask,
                                 String from, String granularity, List<Precision> hypotheses, float[] exact, double local, String routedIn) {
        String routed = routedIn;
        record Tried(Precision h, double left) {}
        var tried = new ArrayList<Tried>();
        for (var h : hypotheses) {
            float[] out = op.apply(h);
            if (out == null || out.length != cand.length) continue;
            tried.add(new Tried(h, rel(cand, out, rowMask)));
        }
        tried.sort(java.util.Comparator.comparingDouble(Tried::left));
        Precision best = tried.isEmpty() ? null : tried.get(0).h();
        double bestLeft = tried.isEmpty() ? Double.POSITIVE_INFINITY : tried.get(0).left();
        String ties = null;
        // per hypothesis, the least it leaves with the near-tie roundings and routing decisions that go the other way
        var closest = new java.util.HashMap<Precision, Double>();
        // roundings at a near-tie may go either way in the candidate: for the three closest hypotheses, keep each flip
        // that brings it closer
        for (int k = 0; k < Math.min(3, tried.size()) && bestLeft > tol; k++) {
            var h = tried.get(k).h();
            double left = tried.get(k).left();
            var sites = Format.nearTies(() -> op.apply(h), MAX_TIES);
            var tieFlips = new java.util.HashSet<Integer>();
            for (int site : sites) {
                tieFlips.add(site);
                double l = rel(cand, Format.flipped(tieFlips, () -> op.apply(h)), rowMask);
                if (l < left) left = l;
                else tieFlips.remove(site);
            }
            closest.merge(h, left, Math::min);
            if (left < bestLeft) {
                bestLeft = left;
                best = h;
                ties = tieFlips.isEmpty() ? null : tieFlips.size() + (tieFlips.size() == 1 ? " rounding" : " roundings") + " at a near-tie taken the other way";
            }
        }
        // the routing may also have gone the other way at a near-tie under a hypothesis (an MLX engine's router on its
        // own dequantized weights): for each, keep the near-tie routing flips that bring it closer
        Precision routedUnder = null;
        for (int k = 0; k < tried.size() && bestLeft > tol && routed == null && !precomputed; k++) {
            var h = tried.get(k).h();
            var hf = routingFlips(q -> op.apply(h), cand, rowMask, rel(cand, op.apply(h), rowMask));
            if (hf.isEmpty()) continue;
            var f = java.util.Set.copyOf(hf.keySet());
            double left = rel(cand, MoeRouting.withRoutingFlipped(f, () -> op.apply(h)), rowMask);
            closest.merge(h, left, Math::min);
            if (left < bestLeft) {
                bestLeft = left;
                best = h;
                ties = null;
                routed = routingWords(hf, Double.NaN);
                routedUnder = h;
            }
        }
        if (best != null && bestLeft <= tol) {
            if (CapturePoints.isCacheRead(kind)) readExplained.put(point, best);
            return new LocalError(step, point, LocalError.Status.PRECISION, local, tol, best.describe() + (ties == null ? "" : " (" + ties + ")")
                    + (routed == null ? "" : "; " + routed), bestLeft, from, granularity);
        }
        // no hypothesis reproduces it to fp32 noise: judge the local error against the envelope of the closest precision
        // class whose outcome depends on its order of arithmetic (a whole half-precision chain)
        Tried chain = null;
        for (var t : tried) if (inStatedClass(t.h())) { chain = t; break; }
        if (chain != null) {
            var h = chain.h();
            double floor = KAPPA * envelope(op, h, exact, rowMask, precomputed);
            // a rounding or a routing decision this class brought to a near-tie (an exact tie in bf16 included), taken
            // the other way, is part of the class's rounding: a known variant must beat what is left after it
            boolean routedHere = h.equals(routedUnder);
            double chainLeft = Math.min(chain.left(), closest.getOrDefault(h, Double.POSITIVE_INFINITY));
            var variant = knownVariant(h, cand, rowMask, chainLeft);
            if (variant != null)
                return new LocalError(step, point, LocalError.Status.UNEXPLAINED, local, tol, h.describe() + "; " + variant, chainLeft, from,
                        granularity, floor, false);
            if (local <= floor) {
                if (envelopeClass == null) envelopeClass = classKey(h);
                if (CapturePoints.isCacheRead(kind)) readExplained.put(point, h);
                return new LocalError(step, point, LocalError.Status.PRECISION, local, tol, h.describe()
                        + (h.equals(best) && ties != null ? " (" + ties + ")" : "") + (routed == null || !routedHere ? "" : "; " + routed),
                        chainLeft, from, granularity, floor, true);
            }
            return new LocalError(step, point, LocalError.Status.UNEXPLAINED, local, tol, h.describe(), chainLeft, from, granularity, floor, false);
        }
        return new LocalError(step, point, LocalError.Status.UNEXPLAINED, local, tol, best == null ? null : best.describe(), bestLeft, from, granularity);
    }

    /**
     * A router's decision counts as a near-tie when its k-th and next expert's probabilities are within this fraction
     * of each other: rounding the router's input and matrix in bf16 moves its probabilities by about that much.
     */
    protected static final double ROUTER_TIE = 0x1p-5;

    /**
     * The routing decisions at a near-tie that, taken the other way, bring the exact op closer to the candidate (each
     * kept only if it does, and only if together they at least halve the local error): by routed-token count, its
     * margin. Empty when the op routes nothing or no flip helps.
     */
    private java.util.Map<Integer, Double> routingFlips(Function<Precision, float[]> op, float[] cand, boolean[] rowMask, double local) {
        var margins = MoeRouting.routingMargins(() -> op.apply(Precision.EXACT));
        var kept = new java.util.LinkedHashMap<Integer, Double>();
        double left = local;
        for (var m : margins) {
            if (m[1] > ROUTER_TIE || kept.size() >= 8) break;
            int i = (int) m[0];
            kept.put(i, m[1]);
            double l = rel(cand, MoeRouting.withRoutingFlipped(kept.keySet(), () -> op.apply(Precision.EXACT)), rowMask);
            if (l < left) left = l;
            else kept.remove(i);
        }
        return left <= local / 2 ? kept : java.util.Map.of();
    }

    /** "2 MoE routing decisions at a near-tie taken the other way (… within 0.4%, 1.1% of each other; …)". */
    private static String routingWords(java.util.Map<Integer, Double> flips, double before) {
        return flips.size() + (flips.size() == 1 ? " MoE routing decision" : " MoE routing decisions")
                + " at a near-tie taken the other way (the k-th and next expert's router probabilities within "
                + flips.values().stream().map(Fmt::percent).collect(java.util.stream.Collectors.joining(", "))
                + " of each other" + (Double.isNaN(before) ? "" : "; local error " + Fmt.sci(before) + " without") + ")";
    }

    /**
     * What rounding does not produce, looked for inside an envelope: a known porting variant of this op (a norm left
     * out, GELU's erf form, the routing not renormalised, …) that, computed under the same hypothesis, brings the
     * recomputation to half the leftover or less. Rounding scatters around the hypothesis; a variant that takes most of
     * the leftover away is structure, and names the bug even below the detection floor. Null when none does.
     */
    private String knownVariant(Precision h, float[] cand, boolean[] rowMask, double leftover) {
        if (variants == null || precomputed) return null;
        String best = null;
        double bestLeft = leftover / 2;
        for (var w : Rewire.Wire.values()) {
            if (w.op() != variantOp) continue;
            float[] out;
            try {
                out = variants.apply(h, Rewire.of(w));
            } catch (RuntimeException notApplicable) {
                continue;
            }
            if (out == null || out.length != cand.length) continue;
            double l = rel(cand, out, rowMask);
            if (l < bestLeft) {
                bestLeft = l;
                best = "the leftover is the known variant \"" + w.words() + "\" (it leaves " + Fmt.sci(l) + " of " + Fmt.sci(leftover) + ")";
            }
        }
        return best;
    }

    /** Samples of an envelope: enough to find its edge at one op, few enough to keep attribution cheap. */
    private static final int SAMPLES = 3;
    /** The margin over the largest sampled local error within which a local error is that class's rounding. */
    protected static final double KAPPA = 1.5;

    /**
     * The largest local error the precision class of h produces at this op: its round-to-nearest outcome and
     * {@link #SAMPLES} outcomes with stochastic rounding ({@link Format#sampled}), each against the exact op. A whole
     * layer recomputed from precomputed shadows has only its round-to-nearest outcome.
     */
    private double envelope(Function<Precision, float[]> op, Precision h, float[] exact, boolean[] rowMask, boolean precomputed) {
        double e = rel(op.apply(h), exact, rowMask);
        if (precomputed) return e;
        for (int s = 0; s < SAMPLES; s++) {
            long seed = 0x5EEDL * 31 + s * 7919L + step * 104729L;
            float[] out = Format.sampled(seed, () -> op.apply(h));
            if (out != null && out.length == exact.length) e = Math.max(e, rel(out, exact, rowMask));
        }
        return e;
    }

    /**
     * Whether h is a chain hypothesis this side may be judged by: a side that states bf16 or fp16 by that class only;
     * one that states fp32, or nothing, by any (an engine's own rounding, such as an fp16 flash attention, is not in
     * its producer's dtype); the reference, which states what it computed in, by nothing finer than its dtype.
     */
    private boolean inStatedClass(Precision h) {
        if (!isChain(h)) return false;
        if (stated == Format.BF16 || stated == Format.F16) return h.activations() == stated;
        // an engine that does not state its class has one all the same: the first envelope it was judged by
        return !reference && (envelopeClass == null || classKey(h) == envelopeClass);
    }

    /** A chain hypothesis's class: its activations' format, or fp16 for ggml's flash attention on fp32 activations. */
    private static Format classKey(Precision h) {
        return h.activations() != Format.F32 ? h.activations() : Format.F16;
    }

    /** Whether h changes nothing but the activations' format (and, for attention, the cache's stores it read). */
    private static boolean onlyActivations(Precision h) {
        var base = Precision.EXACT.withKeys(h.keys()).withValues(h.values()).withActivations(h.activations());
        return h.equals(base);
    }

    /** A hypothesis that runs a whole chain of half-precision roundings, whose outcome depends on its order of arithmetic. */
    protected static boolean isChain(Precision h) {
        return h.activations() != Format.F32 || h.attention() == Precision.Attention.GGML_FLASH;
    }

    /**
     * A framework running the whole model in bf16 or fp16, with RoPE's inverse frequencies kept in fp32 (transformers
     * loading with dtype=) or cast with every other buffer (transformers' model.to(dtype)).
     */
    protected static List<Precision> activationHypotheses() {
        var out = new ArrayList<Precision>();
        for (var f : List.of(Format.BF16, Format.F16)) {
            out.add(Precision.EXACT.withActivations(f));
            out.add(Precision.EXACT.withActivations(f).withRopeFrequencies(f));
        }
        return out;
    }

    /** The framework classes and, besides them, every matmul's input rounded to bf16 or fp16 (ggml on half-precision weights). */
    protected static List<Precision> uniformMatmulHypotheses() {
        var out = new ArrayList<>(activationHypotheses());
        for (var f : List.of(Format.BF16, Format.F16)) out.add(Precision.EXACT.withMatmulInput(f));
        return out;
    }

    /**
     * A KV cache's read window [start+T, stride] on an attention layer: the rows the side read at the previous step
     * (positions 0…start−1, {@code previous}; null where it recorded none: those rows are not judged, unless start is
     * 0), then this step's k or v ({@code entered}) as they entered the cache — exactly, or stored as f16, bf16, q8_0 or
     * q4_0 and read back.
     */
    protected LocalError cacheRead(String point, boolean keys, float[] cand, double tol, float[] entered, float[] previous, int stride) {
        int total = start + T;
        if (cand.length != total * stride) return LocalError.unattributed(step, point, tol, "its read window is not positions 0…" + (total - 1));
        String enteredKind = keys ? CapturePoints.K : CapturePoints.V;
        if (entered == null) return LocalError.unattributed(step, point, tol, "the side has no " + CapturePoints.layer(CapturePoints.layerOf(point), enteredKind));
        if (entered.length != T * stride) return LocalError.unattributed(step, point, tol, "its " + enteredKind + " does not have the checkpoint's shape");
        float[] expect = new float[total * stride];
        boolean[] known = new boolean[total * stride];
        if (previous != null) {
            int n = Math.min(previous.length, start * stride);
            System.arraycopy(previous, 0, expect, 0, n);
            java.util.Arrays.fill(known, 0, n, true);
        }
        System.arraycopy(entered, 0, expect, start * stride, T * stride);
        java.util.Arrays.fill(known, start * stride, total * stride, true);
        var hs = new ArrayList<Precision>();
        for (var s : List.of(Precision.KvStore.F16, Precision.KvStore.BF16, Precision.KvStore.Q8_0, Precision.KvStore.Q4_0))
            hs.add(keys ? Precision.EXACT.withKeys(s) : Precision.EXACT.withValues(s));
        boolean all = previous != null || start == 0;
        return judge(point, CapturePoints.kindOf(point), cand, tol, p -> {
            var store = keys ? p.keys() : p.values();
            if (store == Precision.KvStore.F32) return expect;
            float[] e = expect.clone();
            float[] fresh = store.readBack(java.util.Arrays.copyOfRange(expect, start * stride, total * stride), stride);
            System.arraycopy(fresh, 0, e, start * stride, T * stride);
            return e;
        }, all ? null : known, "this step's " + (keys ? "k" : "v") + (start > 0 ? " after the rows read at the previous step" : ""), null, hs);
    }

    /** The explanation of a reference op that only a precision its stated dtype does not cover reproduces. */
    public static final String REPRODUCED_BY = "reproduced only by ";

    /**
     * The bug class a hybrid model's attribution names where a recurrent state comes back rounded (Qwen3.5): the
     * verdict words it as the divergence itself, not as a near miss of precision, whichever plug-in found it.
     */
    public static final String STATE_KEPT_IN = "recurrent state kept in ";

    /** At most this many near-tie roundings are tried the other way per cell (the first met). */
    private static final int MAX_TIES = 48;


    /** rel L2 of {@code got} against {@code want} over the elements of mask (all when null). */
    protected static double rel(float[] got, float[] want, boolean[] mask) {
        double n = 0, d = 0;
        for (int i = 0; i < got.length; i++) {
            if (mask != null && !mask[i]) continue;
            double w = want[i], e = got[i] - w;
            n += e * e;
            d += w * w;
        }
        if (Double.isNaN(n)) return Double.POSITIVE_INFINITY;
        return d == 0 ? (n == 0 ? 0 : Double.POSITIVE_INFINITY) : Math.sqrt(n / d);
    }
}
