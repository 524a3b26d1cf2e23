package dev.decodiff.harness.arch.gemma4.bisect;

import dev.decodiff.engine.arch.Gemma4Architecture;
import dev.decodiff.harness.bisect.BisectResult;
import dev.decodiff.harness.bisect.Cells;
import dev.decodiff.harness.bisect.ReferenceTensors;
import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.engine.KvType;
import dev.decodiff.engine.Sampler;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.compare.CellStats;
import dev.decodiff.harness.compare.Comparison;
import dev.decodiff.harness.compare.ComparisonResult;
import dev.decodiff.harness.compare.EngineThrewException;
import dev.decodiff.harness.compare.FirstDivergence;
import dev.decodiff.harness.compare.ToleranceProfile;
import dev.decodiff.harness.compare.detect.Detector;
import dev.decodiff.harness.compare.detect.DetectorContext;
import dev.decodiff.harness.compare.detect.Detectors;
import dev.decodiff.harness.compare.detect.Finding;
import dev.decodiff.harness.dump.CapturedTensor;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.dump.DumpStep;
import dev.decodiff.harness.arch.gemma4.LiveCandidate;
import dev.decodiff.harness.live.LiveStep;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Predicate;

/**
 * Proves where a divergence comes from by running the engine again with reference tensors fed in, level by level
 * from the coarsest. Starting from compare's first divergent step:
 * <ol>
 * <li><b>local vs accumulated</b>: one run in which every layer gets the reference's input (embed, ple, the previous
 *     layer's out) and the reference's cache history (the reference's attn.k / attn.v entered at every earlier step);
 *     the first cell wrong on those inputs is the culprit, layers after it that are right on their own input only
 *     inherit the error;</li>
 * <li><b>substitution</b> inside the culprit layer: each of q, k, v, k_read, v_read, attn.out, mlp.out, moe.out (and
 *     the pairs q+k, k+v, k_read+v_read) replaced by the reference's, on top of the reference's input: which heals the
 *     layer's output;</li>
 * <li><b>cache transplant</b> over steps: the reference's cache for steps &lt; t, the engine's own from t on: does the
 *     step compute wrongly, or was the cache corrupted earlier;</li>
 * <li>a one-sentence <b>diagnosis</b> of the culprit tensor ({@link #DETECTORS}).</li>
 * </ol>
 */
public final class Bisector {
    /** Layer tensors bisect substitutes, in causal order; pairs follow. */
    static final List<List<String>> SUBSTITUTIONS = List.of(
            List.of(CapturePoints.Q), List.of(CapturePoints.K), List.of(CapturePoints.V), List.of(CapturePoints.K_READ), List.of(CapturePoints.V_READ),
            List.of(CapturePoints.ATTN_OUT), List.of(CapturePoints.MLP_OUT), List.of(CapturePoints.MOE_OUT),
            List.of(CapturePoints.Q, CapturePoints.K), List.of(CapturePoints.K, CapturePoints.V), List.of(CapturePoints.K_READ, CapturePoints.V_READ));

    /**
     * Bisect's detectors: first the ones that recompute an op from the reference's inputs under named variants (they
     * say what compare's patterns only describe, e.g. "a rotation" or "a normalisation missing"), then compare's, then
     * the ones that need the model or the reference's cache history to read a pattern.
     */
    public static final List<Detector> DETECTORS = Detectors.extend(
            List.of(new RopeDetector(), new RewireDetector(), new AttentionVariantsDetector()),
            Detectors.COMPARE,
            List.of(new CacheSlotsDetector(), new LayerScalarDetector()));

    /** Up to this many earlier steps the transplant is tried at every boundary; beyond it, by bisection. */
    static final int TRANSPLANT_EVERY_STEP = 8;

    private final Gemma4Model model;
    private final EngineOptions options;
    private final DumpReader ref;
    private final ToleranceProfile profile;

    public Bisector(Gemma4Model model, EngineOptions options, DumpReader ref, ToleranceProfile profile) {
        this.model = model;
        this.options = options.withProbe(null);
        this.ref = ref;
        this.profile = profile;
    }

    /** The free-running comparison bisect starts from: the engine live, teacher-forced on the reference's tokens. */
    public ComparisonResult compare() {
        try (var source = LiveCandidate.forPoints(model, options, ref.manifest(), ref.allPoints(), false)) {
            return Comparison.run(ref, source, new Comparison.Options(profile, false, null));
        }
    }

    /** Compares, then bisects. */
    public BisectResult run() { return bisect(compare()); }

    /** Bisects a comparison of this engine (with these options) against this reference. */
    public BisectResult bisect(ComparisonResult compare) {
        long t0 = System.nanoTime();
        FirstDivergence fd = compare.firstDivergence();
        var failure = compare.engineFailure();
        if (fd == null && failure != null)
            return withoutBisection(compare, "The " + failure.sentence() + ". Every cell before it is within tolerance, so there is no numeric "
                    + "divergence to bisect: the exception is the finding.", t0);
        if (fd == null)
            return withoutBisection(compare, "No divergence: every cell of every step is within tolerance, so there is nothing to bisect.", t0);
        var rounding = kvRounding(compare, fd, t0);
        if (rounding != null) return rounding;
        try {
            return bisectAt(compare, fd, t0);
        } catch (EngineThrewException e) {
            return withoutBisection(compare, "Compare's first divergence is step " + fd.step() + ", " + fd.point() + ", but while bisecting it "
                    + e.failure().sentence() + ", so bisect could not finish.", t0);
        }
    }

    /**
     * A lossy KV cache (bf16, q8_0, q4_0) rounds every key and value it stores: against fp32 tolerances that is a
     * divergence, but not a bug. The control is the same run with an exact f32 cache: when it is within tolerance, the
     * divergence is the cache type's rounding and bisect says so instead of naming a culprit. When the control diverges
     * too, there is a real fault underneath and bisect proceeds as usual (null).
     */
    private BisectResult kvRounding(ComparisonResult compare, FirstDivergence fd, long t0) {
        if (options.keyType() == KvType.F32 && options.valueType() == KvType.F32) return null;
        var exact = options.withKvTypes(KvType.F32, KvType.F32);
        ComparisonResult control;
        try (var source = LiveCandidate.forPoints(model, exact, ref.manifest(), ref.allPoints(), false)) {
            control = Comparison.run(ref, source, new Comparison.Options(profile, false, null));
        }
        if (control.firstDivergence() != null || control.engineFailure() != null) return null;
        String types = options.keyType().id() + "/" + options.valueType().id();
        String conclusion = String.format(Locale.ROOT, "Compare's first divergence is step %d, %s (rel L2 %.2e against %.2e), with the KV cache"
                        + " stored as %s (keys/values). The same run with an exact f32 cache keeps every cell within tolerance, so this is the"
                        + " expected rounding of the %s cache, not a bug: no culprit to bisect. Judge a %s cache with tolerances made for"
                        + " it (decodiff calibrate, docs/tolerances.md; drift per type in docs/kv-cache.md), or bisect with --kv-cache f32.",
                fd.step(), fd.point(), fd.cell().relL2(), fd.cell().tolerance(), types, types, types);
        return new BisectResult(compare, null, List.of(), List.of(), List.of(), List.of(), null, null, null, conclusion, List.of(), secs(t0), types, null);
    }

    private static BisectResult withoutBisection(ComparisonResult compare, String conclusion, long t0) {
        return new BisectResult(compare, null, List.of(), List.of(), List.of(), List.of(), null, null, null, conclusion, List.of(), secs(t0), null, null);
    }

    private BisectResult bisectAt(ComparisonResult compare, FirstDivergence fd, long t0) {
        int s = fd.step();
        var notes = new LinkedHashSet<String>();
        try (var refs = new ReferenceTensors(ref)) {
            DumpStep refStep = refs.step(s);
            Set<String> stepPoints = ref.points(s);

            // (a) local: every layer on the reference's input and cache history, in one run.
            var inputs = new LinkedHashSet<String>();
            for (String p : stepPoints) if (isInput(p)) inputs.add(p);
            var judged = new LocalCells(s, refStep, profile);
            Run local = run(refs, new Plan(s, s, inputs, p -> true), judged);
            notes.addAll(local.notes);
            var localCells = judged.cells;
            var accumulated = new HashMap<String, CellStats>();
            for (var c : compare.cellsOfStep(s)) accumulated.put(c.point(), c);

            CellStats culpritCell = localCells.values().stream().filter(CellStats::failed).findFirst().orElse(null);
            BisectResult.Culprit culprit = culpritCell == null ? null
                    : new BisectResult.Culprit(s, culpritCell.layer() < 0 ? null : culpritCell.layer(), culpritCell.point(), culpritCell);
            var layers = layerRows(localCells, accumulated, culprit);
            var modelRows = new ArrayList<BisectResult.ModelRow>();
            for (String p : List.of(CapturePoints.EMBED, CapturePoints.PLE, CapturePoints.FINAL_NORM, CapturePoints.LOGITS))
                if (stepPoints.contains(p)) modelRows.add(new BisectResult.ModelRow(p, accumulated.get(p), localCells.get(p)));

            // (d) diagnosis of the culprit as computed on the reference's input.
            String diagnosis = null;
            Finding.Variant variant = null;
            if (culpritCell != null) {
                var st = ref.manifest().step(s);
                var localStep = new LiveStep(s, st.start(), st.length(), local.captured,
                        local.logits == null ? -1 : Sampler.argmax(local.logits), Double.NaN, "engine on the reference's input, step " + s);
                var ctx = new DetectorContext(culpritCell, refStep, localStep, DetectorContext.nearEqual(culpritCell.tolerance()), Gemma4Architecture.INSTANCE.wrap(model), refs);
                var found = Detectors.explain(DETECTORS, ctx);
                if (found != null) {
                    diagnosis = found.sentence();
                    variant = found.variant();
                }
            }
            if (diagnosis == null && (culpritCell == null || culpritCell.point().equals(fd.point()))) {
                diagnosis = fd.diagnosis();
                variant = fd.variant();
            }
            if (diagnosis == null && culpritCell != null) diagnosis = noPattern(culpritCell);

            // (b) substitution inside the culprit layer.
            var subs = new ArrayList<BisectResult.Substitution>();
            if (culprit != null && culprit.layer() != null)
                subs.addAll(substitutions(refs, refStep, s, culprit.layer(), inputs, local, notes));

            // (c) cache transplant over earlier steps, on the culprit cell (or compare's, when nothing is wrong locally).
            String tp = culprit != null ? culprit.point() : fd.point();
            var transplant = transplant(refs, refStep, s, tp, accumulated.get(tp), notes);
            String cacheVerdict = cacheVerdict(s, tp, transplant);

            String conclusion = conclusion(fd, culprit, layers, subs, cacheVerdict);
            return new BisectResult(compare, culprit, layers, modelRows, subs, transplant, cacheVerdict, diagnosis, variant, conclusion,
                    List.copyOf(notes), secs(t0), null, null);
        }
    }

    private static double secs(long t0) { return (System.nanoTime() - t0) / 1e9; }

    /** Points that are a layer's input when replaced: embed, ple, every layer's out, final_norm (the logits' input). */
    static boolean isInput(String p) {
        return p.equals(CapturePoints.EMBED) || p.equals(CapturePoints.PLE) || p.equals(CapturePoints.FINAL_NORM)
                || CapturePoints.layerOf(p) >= 0 && CapturePoints.kindOf(p).equals(CapturePoints.OUT);
    }

    private List<BisectResult.LayerRow> layerRows(Map<String, CellStats> local, Map<String, CellStats> acc, BisectResult.Culprit culprit) {
        var rows = new ArrayList<BisectResult.LayerRow>();
        for (int i = 0; i < model.config().numLayers(); i++) {
            String out = CapturePoints.layer(i, CapturePoints.OUT);
            final int layer = i;
            String firstLocal = local.values().stream().filter(c -> c.layer() == layer && c.failed()).map(CellStats::point)
                    .findFirst().orElse(null);
            CellStats a = acc.get(out), l = local.get(out);
            BisectResult.Status status;
            if (firstLocal != null) status = culprit != null && culprit.layer() != null && culprit.layer() == i
                    ? BisectResult.Status.CULPRIT : BisectResult.Status.ALSO_LOCAL;
            else if (a == null && l == null) status = BisectResult.Status.NOT_RECORDED;
            else if (a != null && a.failed()) status = BisectResult.Status.INHERITS;
            else status = BisectResult.Status.CLEAN;
            rows.add(new BisectResult.LayerRow(i, a, l, firstLocal, status));
        }
        return rows;
    }

    private List<BisectResult.Substitution> substitutions(ReferenceTensors refs, DumpStep refStep, int s, int layer,
                                                          Set<String> inputs, Run local, Set<String> notes) {
        var out = new ArrayList<BisectResult.Substitution>();
        String outPoint = CapturePoints.layer(layer, CapturePoints.OUT);
        var localOut = local.captured.get(outPoint);
        if (!refStep.has(outPoint) || localOut == null) {
            notes.add("substitution skipped: the reference has no " + outPoint + " at step " + s + " to judge it by");
            return out;
        }
        var refOut = refStep.tensor(outPoint);
        double tol = profile.tolerance(outPoint);
        double beforeAll = Cells.all(refOut, localOut.view()), beforeLast = Cells.lastRow(refOut, localOut.view());
        if (beforeAll <= tol) {
            notes.add("substitution skipped: " + outPoint + " is within tolerance on the reference's input, so there is nothing to heal");
            return out;
        }
        var base = new LinkedHashSet<String>();
        for (String p : inputs) if (!(CapturePoints.layerOf(p) >= layer) && !p.equals(CapturePoints.FINAL_NORM)) base.add(p);
        int T = ref.manifest().step(s).length();
        for (var group : SUBSTITUTIONS) {
            var names = group.stream().map(k -> CapturePoints.layer(layer, k)).toList();
            if (!names.stream().allMatch(refStep::has)) continue;
            boolean readOnly = group.stream().allMatch(CapturePoints::isCacheRead);
            boolean lastOnly = readOnly && T > 1;
            String scope = lastOnly ? "last position" : "all rows";
            double before = lastOnly ? beforeLast : beforeAll;
            String name = String.join("+", group);
            var replace = new LinkedHashSet<>(base);
            replace.addAll(names);
            Run r = run(refs, new Plan(s, s, replace, outPoint::equals));
            var refused = names.stream().filter(r.refused::contains).toList();
            if (!refused.isEmpty()) {
                String why = r.notes.stream().filter(n -> refused.stream().anyMatch(n::contains)).findFirst().orElse("not substitutable")
                        .replaceFirst("^step \\d+: ", "");
                out.add(new BisectResult.Substitution(name, names, scope, before, Double.NaN, tol, false, why));
                continue;
            }
            var got = r.captured.get(outPoint).view();
            double after = lastOnly ? Cells.lastRow(refOut, got) : Cells.all(refOut, got);
            out.add(new BisectResult.Substitution(name, names, scope, before, after, tol, after <= tol, null));
        }
        return out;
    }

    private List<BisectResult.TransplantRow> transplant(ReferenceTensors refs, DumpStep refStep, int s, String point,
                                                        CellStats free, Set<String> notes) {
        double tol = profile.tolerance(point);
        var rows = new TreeMap<Integer, BisectResult.TransplantRow>();
        if (free != null) rows.put(0, new BisectResult.TransplantRow(0, free.relL2(), tol, free.passed(), true));
        else rows.put(0, transplantAt(refs, refStep, s, point, 0, tol, notes));
        if (s == 0) return List.copyOf(rows.values());
        if (s <= TRANSPLANT_EVERY_STEP) {
            for (int t = 1; t <= s; t++) rows.put(t, transplantAt(refs, refStep, s, point, t, tol, notes));
        } else {
            var full = transplantAt(refs, refStep, s, point, s, tol, notes);
            rows.put(s, full);
            if (full.healed() && !rows.get(0).healed()) {
                int lo = 0, hi = s; // lo fails, hi heals
                while (hi - lo > 1) {
                    int mid = (lo + hi) >>> 1;
                    var r = transplantAt(refs, refStep, s, point, mid, tol, notes);
                    rows.put(mid, r);
                    if (r.healed()) hi = mid;
                    else lo = mid;
                }
            }
        }
        return List.copyOf(rows.values());
    }

    private BisectResult.TransplantRow transplantAt(ReferenceTensors refs, DumpStep refStep, int s, String point, int t,
                                                    double tol, Set<String> notes) {
        Run r = run(refs, new Plan(s, t, Set.of(), point::equals));
        notes.addAll(r.notes);
        var c = r.captured.get(point);
        double rel = c == null ? Double.NaN : Cells.of(s, point, refStep.tensor(point), c.view(), tol).relL2();
        return new BisectResult.TransplantRow(t, rel, tol, rel <= tol, false);
    }

    static String cacheVerdict(int s, String point, List<BisectResult.TransplantRow> rows) {
        if (s == 0) return "Step 0 reads no cache history: the error arises within step 0 itself.";
        var full = rows.get(rows.size() - 1);
        String kind = CapturePoints.kindOf(point);
        boolean read = CapturePoints.isCacheRead(kind);
        String range = s == 1 ? "step 0" : "steps 0–" + (s - 1);
        if (!full.healed()) {
            if (read)
                return "With the reference's keys and values entering the cache at " + range + ", " + point + " at step " + s
                        + " is still wrong: the values that entered the cache are not the cause — the cache stores or hands back its rows wrongly.";
            return "With the reference's cache for " + range + ", " + point + " at step " + s
                    + " is still wrong: step " + s + " computes wrongly; the cache history is not the cause.";
        }
        int firstHealing = full.referenceCacheSteps();
        for (int i = rows.size() - 1; i >= 0 && rows.get(i).healed(); i--) firstHealing = rows.get(i).referenceCacheSteps();
        int corrupt = firstHealing - 1;
        if (corrupt < 0) return "Every cache history gives a correct " + point + " at step " + s + ".";
        return "With the reference's cache for steps 0–" + corrupt + " step " + s + " is right; with the engine's own entries from step "
                + corrupt + " on it is wrong: the cache was corrupted at step " + corrupt + ", not computed wrongly at step " + s + ".";
    }

    private static String conclusion(FirstDivergence fd, BisectResult.Culprit culprit, List<BisectResult.LayerRow> layers,
                                     List<BisectResult.Substitution> subs, String cacheVerdict) {
        var sb = new StringBuilder();
        if (culprit == null && fd.cell() == null) {
            return "No cell at step " + fd.step() + " is over tolerance, free-running or on the reference's input: compare's divergence is a greedy-token flip ("
                    + fd.diagnosis() + "). The numbers are within tolerance everywhere; the flip comes from their sum over many cells (a tighter --tolerance profile shows which), or the margin is noise (compare --near-tie).";
        }
        if (culprit == null) {
            sb.append("Nothing at step ").append(fd.step()).append(" is wrong on the reference's own input and cache: the divergence at ")
                    .append(fd.point()).append(" is carried in from earlier steps. ").append(cacheVerdict);
            return sb.toString();
        }
        var c = culprit.local();
        sb.append(culprit.point()).append(" at step ").append(culprit.step()).append(" is wrong on the reference's own input and cache (rel L2 ")
                .append(sci(c.relL2())).append(" against ").append(sci(c.tolerance())).append(")");
        if (culprit.layer() != null) {
            sb.append(": layer ").append(culprit.layer()).append(" is the culprit");
            long inherit = layers.stream().filter(l -> l.status() == BisectResult.Status.INHERITS).count();
            var also = layers.stream().filter(l -> l.status() == BisectResult.Status.ALSO_LOCAL).map(l -> Integer.toString(l.layer())).toList();
            if (inherit > 0 && also.isEmpty()) sb.append(", the ").append(inherit).append(" wrong layer").append(inherit == 1 ? "" : "s").append(" after it only inherit");
            else if (!also.isEmpty()) sb.append("; layer").append(also.size() == 1 ? " " : "s ").append(String.join(", ", also))
                    .append(also.size() == 1 ? " is" : " are").append(" wrong on its own input too (the same fault or another)");
            sb.append(". ");
            var healed = subs.stream().filter(BisectResult.Substitution::healed).toList();
            String out = CapturePoints.layer(culprit.layer(), CapturePoints.OUT);
            if (subs.isEmpty()) {
                sb.append("");
            } else if (healed.isEmpty()) {
                sb.append("No substitution inside the layer heals ").append(out)
                        .append(": the error arises after its last inner capture point (residual adds, post-norms, per-layer input, layer_scalar). ");
            } else {
                var first = healed.get(0);
                sb.append("Substituting the reference's ").append(first.name().replace("+", " and ")).append(" heals ").append(out)
                        .append(" (").append(sci(first.before())).append(" → ").append(sci(first.after()))
                        .append(first.scope().equals("all rows") ? "" : ", " + first.scope()).append(")");
                if (healed.size() > 1) sb.append("; so do ").append(String.join(", ", healed.subList(1, healed.size()).stream().map(BisectResult.Substitution::name).toList()));
                sb.append(". ");
            }
        } else {
            sb.append(". ");
        }
        if (cacheVerdict != null) sb.append(cacheVerdict);
        return sb.toString().strip();
    }

    private static String noPattern(CellStats c) {
        return "no known pattern fits " + c.point() + " (rel L2 " + sci(c.relL2()) + ", cosine "
                + String.format(Locale.ROOT, "%.4f", c.cosine()) + ", norm ratio " + String.format(Locale.ROOT, "%.4f", c.normRatio()) + ")";
    }

    static String sci(double x) { return dev.decodiff.harness.report.Fmt.sci(x); }

    private record Run(Map<String, CapturedTensor> captured, Set<String> refused, List<String> notes, float[] logits) {}

    private Run run(ReferenceTensors refs, Plan plan) { return run(refs, plan, null); }

    /** A run of the plan; with a {@code local} collector, the target step's tensors go to it as produced and {@code captured} is what it kept. */
    private Run run(ReferenceTensors refs, Plan plan, LocalCells local) {
        var probe = new SubstitutionProbe(refs, plan);
        if (local != null) probe.sendTo(local);
        var session = model.newSession(options.withProbe(probe));
        float[] logits = null;
        for (int s = 0; s <= plan.target(); s++) {
            try {
                logits = session.forward(ref.manifest().stepTokens(s));
            } catch (BadInputException e) {
                throw e;
            } catch (RuntimeException e) {
                throw new EngineThrewException(s, e);
            }
        }
        return new Run(local != null ? local.kept : probe.captured, probe.refused, probe.notes, logits);
    }

    static Predicate<String> all() { return p -> true; }
}
