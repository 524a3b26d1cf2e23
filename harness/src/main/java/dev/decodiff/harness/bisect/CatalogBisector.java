package dev.decodiff.harness.bisect;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.Probe;
import dev.decodiff.engine.arch.LoadedModel;
import dev.decodiff.harness.compare.CellStats;
import dev.decodiff.harness.compare.Comparison;
import dev.decodiff.harness.compare.ComparisonResult;
import dev.decodiff.harness.compare.FirstDivergence;
import dev.decodiff.harness.compare.ToleranceProfile;
import dev.decodiff.harness.compare.detect.Finding;
import dev.decodiff.harness.dump.CapturedTensor;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.live.ArchitectureCandidate;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * bisect for an architecture whose engine carries a fault catalog (Qwen3.5), through the plug-in seam: it names the
 * bug and proves it, starting from compare's first divergent cell.
 * <ol>
 * <li><b>naming by replay</b>: decodiff's engine, teacher-forced on the reference's tokens, is run with each catalog
 *     fault planted alone; the faults that change the culprit cell at all are the candidates, and the one whose tensor
 *     there reproduces the candidate's (‖variant − candidate‖ / ‖reference‖ within the cell's tolerance, the runner-up —
 *     another fault or the clean engine — at least {@link #NAMING_MARGIN}× further) is named;</li>
 * <li><b>proof by substitution</b>: the reference's tensor is written into the candidate engine at the culprit cell
 *     (the probe returns a replacement), and the layer's output at the first step the error had broken it must come
 *     back within tolerance. Where a bug also feeds sibling points of the same op (q and k of one rotation), the
 *     culprit is joined by the layer's failing points that follow it, one more at a time, up to the mixer's output;
 *     the set that heals is then written into every layer, and the step's logits must heal too.</li>
 * </ol>
 * The culprit is compare's first divergent cell itself: every cell before it is within tolerance.
 */
public final class CatalogBisector {
    /** A fault names the candidate only when the runner-up (another fault, or the clean engine) is this many times further. */
    static final double NAMING_MARGIN = 10;

    /** A layer's points a sibling substitution stops before: the mixer's and feed-forward's outputs, and the layer's. */
    private static final Set<String> OUTPUTS = Set.of(CapturePoints.LINEAR_OUT, CapturePoints.ATTN_OUT, CapturePoints.MLP_OUT,
            CapturePoints.MOE_OUT, CapturePoints.OUT);

    private final LoadedModel model;
    private final DumpReader ref;
    private final ToleranceProfile profile;
    private final CatalogReplays replays;

    public CatalogBisector(LoadedModel model, DumpReader ref, ToleranceProfile profile) {
        this(model, ref, profile, new CatalogReplays(model, ref.manifest(), false));
    }

    /** With replays shared across bisects of one reference (the self-test bisects every fault of a case). */
    public CatalogBisector(LoadedModel model, DumpReader ref, ToleranceProfile profile, CatalogReplays replays) {
        this.model = model;
        this.ref = ref;
        this.profile = profile;
        this.replays = replays;
    }

    /**
     * The engine with these catalog faults, live and teacher-forced, compared with the reference (from the kept
     * replay where replays keep whole runs: the same run, without running it twice).
     */
    public ComparisonResult compareLive(List<String> faults) {
        if (replays.keepsAll()) {
            try (var source = replays.source(faults)) {
                return Comparison.run(ref, source, new Comparison.Options(profile, false, null));
            }
        }
        var points = ref.allPoints();
        try (var source = new ArchitectureCandidate(model, faults, ref.manifest(), points::contains, false)) {
            return Comparison.run(ref, source, new Comparison.Options(profile, false, null));
        }
    }

    /** Compares the engine with these faults, then bisects. */
    public BisectResult runLive(List<String> faults) { return bisectLive(compareLive(faults), faults); }

    /** Bisects a comparison whose candidate was decodiff's engine with these catalog faults. */
    public BisectResult bisectLive(ComparisonResult cmp, List<String> faults) {
        return bisect(cmp, (s, p) -> replays.at(faults, s, p), faults);
    }

    /** Bisects a comparison whose candidate is a dump; the substitutions run in the named fault's engine, its stand-in. */
    public BisectResult bisectDump(ComparisonResult cmp, DumpReader candidate) {
        return bisect(cmp, (s, p) -> {
            if (!candidate.points(s).contains(p)) return null;
            try (var st = candidate.readStep(s)) {
                return st.tensor(p).toFloats();
            }
        }, null);
    }

    private interface CandidateTensor { float[] at(int step, String point); }

    private BisectResult bisect(ComparisonResult cmp, CandidateTensor candidate, List<String> liveFaults) {
        long t0 = System.nanoTime();
        FirstDivergence fd = cmp.firstDivergence();
        var failure = cmp.engineFailure();
        if (fd == null && failure != null)
            return without(cmp, "The " + failure.sentence() + ". Every cell before it is within tolerance, so there is no numeric "
                    + "divergence to bisect: the exception is the finding.", t0);
        if (fd == null)
            return without(cmp, "No divergence: every cell of every step is within tolerance, so there is nothing to bisect and no fault to name.", t0);
        if (fd.cell() == null)
            return without(cmp, "No cell is over tolerance: compare's divergence is a greedy-token flip (" + fd.diagnosis()
                    + "), so there is no culprit cell to name a fault by.", t0);
        int s = fd.step();
        String point = fd.point();
        var notes = new ArrayList<String>();
        float[] cand = candidate.at(s, point);
        var culprit = new BisectResult.Culprit(s, fd.layer(), point, fd.cell());
        if (cand == null) {
            notes.add("the candidate recorded no " + point + " at step " + s + " to name a fault by");
            return new BisectResult(cmp, culprit, List.of(), List.of(), List.of(), List.of(), null, null, null,
                    "Compare's first divergence is step " + s + ", " + point + ", but the candidate's tensor there is not at hand: nothing to name.",
                    notes, secs(t0), null, null);
        }

        // (1) naming by replay
        var byReplay = name(s, point, cand);
        Finding.Variant variant = byReplay.variant();
        String named = byReplay.named(), diagnosis = byReplay.diagnosis();
        var tried = byReplay.tried();

        // (2) proof by substitution, in the candidate's own engine or the named fault's stand-in
        List<String> engineFaults = liveFaults != null ? liveFaults : named != null ? List.of(named) : null;
        var subs = new ArrayList<BisectResult.Substitution>();
        Boolean proved = null;
        String engine = engineFaults == null ? null : liveFaults != null ? "the candidate engine"
                : "decodiff's engine with " + named + " (the candidate is a dump; this engine reproduces it)";
        if (engineFaults == null) notes.add("no substitution: the candidate is a dump, and no catalog fault reproduces it to stand in for its engine");
        else proved = prove(cmp, s, point, engineFaults, subs, notes);

        var naming = new BisectResult.CatalogNaming(s, point, List.copyOf(tried), byReplay.cleanRel(), named, engine, proved);
        String conclusion = conclusion(fd, tried.size(), named, variant, subs, proved, engine);
        return new BisectResult(cmp, culprit, List.of(), List.of(), List.copyOf(subs), List.of(), null, diagnosis, variant, conclusion,
                List.copyOf(notes), secs(t0), null, naming);
    }

    /**
     * Writes the reference's tensors into the engine at step {@code s} and judges the culprit layer's output at the first
     * step the free-running candidate had it wrong. Null when there is nothing downstream to heal.
     */
    private Boolean prove(ComparisonResult cmp, int s, String point, List<String> faults, List<BisectResult.Substitution> rows,
                          List<String> notes) {
        int layer = CapturePoints.layerOf(point);
        if (layer < 0) {
            notes.add("no substitution: " + point + " is a model-level point with no layer after it to heal");
            return null;
        }
        String out = CapturePoints.layer(layer, CapturePoints.OUT);
        var broken = cmp.cells().stream().filter(c -> c.step() >= s && c.point().equals(out) && c.failed())
                .min(Comparator.comparingInt(CellStats::step)).orElse(null);
        if (broken == null) {
            notes.add("no substitution: " + out + " stays within tolerance at every step from " + s + " on, so there is nothing downstream to heal");
            return null;
        }
        int j = broken.step();
        long rank = CapturePoints.causalRank(point);
        var siblings = cmp.cellsOfStep(s).stream().filter(c -> c.failed() && c.layer() == layer && CapturePoints.causalRank(c.point()) > rank
                        && !OUTPUTS.contains(CapturePoints.kindOf(c.point())))
                .sorted(Comparator.comparingLong(c -> CapturePoints.causalRank(c.point()))).map(CellStats::point).toList();
        var set = new LinkedHashSet<String>(List.of(point));
        try (var refs = new ReferenceTensors(ref)) {
            for (int k = 0; ; k++) {
                var row = substitute(refs, faults, s, Set.copyOf(set), j, out, broken.relL2(), label(set, ""));
                rows.add(row);
                if (row.healed()) break;
                if (row.note() != null || k >= siblings.size()) return false;
                set.add(siblings.get(k));
            }
            // the same tensors in every layer that records them: the whole step must come back
            var every = new LinkedHashSet<String>();
            for (String p : set)
                for (int i = 0; i < model.numLayers(); i++) {
                    String q = CapturePoints.layer(i, CapturePoints.kindOf(p));
                    if (refs.has(s, q)) every.add(q);
                }
            var logits = cmp.cells().stream().filter(c -> c.step() == j && c.point().equals(CapturePoints.LOGITS)).findFirst().orElse(null);
            if (logits == null || every.equals(set)) return true;
            if (!logits.failed()) {
                notes.add("the logits at step " + j + " are within tolerance free-running, so writing the reference's tensors into every layer has nothing more to heal");
                return true;
            }
            var all = substitute(refs, faults, s, every, j, CapturePoints.LOGITS, logits.relL2(), label(set, "every layer's "));
            rows.add(all);
            return all.healed();
        }
    }

    /** What replaying the catalog says of a candidate's tensor at a cell: the fault named (or null), why, and every fault tried. */
    public record Naming(Finding.Variant variant, String named, String diagnosis, List<BisectResult.Tried> tried, double cleanRel) {}

    /**
     * Names the catalog fault whose replay (the engine with that fault alone, teacher-forced on the reference) reproduces
     * {@code cand} at (s, point), with a clear margin over the runner-up; distances are measured on the reference's
     * scale, as compare's are (a candidate's tensor may be all zeros: a dropped state).
     */
    public Naming name(int s, String point, float[] cand) {
        double tol = profile.tolerance(point);
        double scale;
        try (var refs = new ReferenceTensors(ref)) {
            float[] r = refs.floats(s, point);
            scale = r == null || r.length != cand.length ? norm(cand) : norm(r);
        }
        float[] clean = replays.at(List.of(), s, point);
        double cleanRel = clean == null || clean.length != cand.length ? Double.POSITIVE_INFINITY : relTo(clean, cand, scale);
        var tried = new ArrayList<BisectResult.Tried>();
        for (String f : model.architecture().faultNames()) {
            float[] t = replays.at(List.of(f), s, point);
            if (t == null || t.length != cand.length || clean != null && java.util.Arrays.equals(t, clean)) continue;
            tried.add(new BisectResult.Tried(f, relTo(t, cand, scale)));
        }
        tried.sort(Comparator.comparingDouble(BisectResult.Tried::relL2));
        Finding.Variant variant = null;
        String named = null, diagnosis;
        if (tried.isEmpty()) {
            diagnosis = "no catalog fault changes " + point + " at step " + s + ": the bug is not one the catalog holds";
        } else {
            var best = tried.get(0);
            String runnerUp = tried.size() > 1 && tried.get(1).relL2() < cleanRel ? tried.get(1).fault() : "the clean engine";
            double runnerRel = tried.size() > 1 ? Math.min(tried.get(1).relL2(), cleanRel) : cleanRel;
            variant = new Finding.Variant("catalog fault", best.fault(), best.relL2(), runnerUp, runnerRel);
            String what = model.architecture().faultDescription(best.fault());
            boolean reproduces = best.relL2() <= tol, clear = runnerRel >= NAMING_MARGIN * best.relL2() && runnerRel > tol;
            if (reproduces && clear) {
                named = best.fault();
                diagnosis = "decodiff's engine with " + best.fault() + " planted reproduces the candidate's " + point
                        + (best.relL2() == 0 ? " bit for bit" : " to rel L2 " + dev.decodiff.harness.report.Fmt.sci(best.relL2())) + (what == null ? "" : " — " + what)
                        + "; the runner-up, " + runnerUp + ", is " + dev.decodiff.harness.report.Fmt.sci(runnerRel) + " from it"
                        + (runnerRel == cleanRel ? "" : ", the clean engine " + dev.decodiff.harness.report.Fmt.sci(cleanRel));
            } else {
                variant = null;
                diagnosis = reproduces
                        ? "two catalog faults fit " + point + ": " + best.fault() + " (rel L2 " + dev.decodiff.harness.report.Fmt.sci(best.relL2()) + ") and "
                          + runnerUp + " (" + dev.decodiff.harness.report.Fmt.sci(runnerRel) + ")"
                        : "no catalog fault reproduces the candidate's " + point + ": the closest, " + best.fault() + ", is "
                          + dev.decodiff.harness.report.Fmt.sci(best.relL2()) + " from it (tolerance " + dev.decodiff.harness.report.Fmt.sci(tol) + "), the clean engine " + dev.decodiff.harness.report.Fmt.sci(cleanRel);
            }
        }
        return new Naming(variant, named, diagnosis, tried, cleanRel);
    }

    private static String label(Set<String> points, String prefix) {
        return prefix + String.join("+", points.stream().map(CapturePoints::kindOf).toList());
    }

    /** One run of the engine with the reference's tensors written in at step s, judged on (j, judged). */
    private BisectResult.Substitution substitute(ReferenceTensors refs, List<String> faults, int s, Set<String> replace, int j,
                                                 String judged, double before, String name) {
        double tol = profile.tolerance(judged);
        String scope = "step " + j + ", " + judged;
        var refused = new ArrayList<String>();
        CapturedTensor[] got = new CapturedTensor[1];
        int[] step = {0};
        Probe probe = new Probe() {
            @Override
            public boolean wants(String p) { return step[0] == s && replace.contains(p) || step[0] == j && p.equals(judged); }

            @Override
            public void beginStep(int st, int start, int length) { step[0] = st; }

            @Override
            public float[] capture(String p, int[] shape, float[] data) {
                if (step[0] == j && p.equals(judged)) got[0] = CapturedTensor.of(p, shape, data);
                if (step[0] != s || !replace.contains(p)) return null;
                float[] r = refs.floats(s, p);
                if (r == null || r.length != data.length) {
                    refused.add(p + (r == null ? ": the reference has none" : ": the engine's has " + data.length + " values, the reference's " + r.length));
                    return null;
                }
                return r;
            }
        };
        var session = model.newSession(probe, faults);
        for (int t = 0; t <= j; t++) session.forward(ref.manifest().stepTokens(t));
        var replaced = List.copyOf(replace);
        if (!refused.isEmpty())
            return new BisectResult.Substitution(name, replaced, scope, before, Double.NaN, tol, false, "cannot be substituted: " + String.join("; ", refused));
        double after = Cells.of(j, judged, refs.view(j, judged), got[0].view(), tol).relL2();
        return new BisectResult.Substitution(name, replaced, scope, before, after, tol, after <= tol, null);
    }

    private static String conclusion(FirstDivergence fd, int tried, String named, Finding.Variant v, List<BisectResult.Substitution> subs,
                                     Boolean proved, String engine) {
        var sb = new StringBuilder();
        sb.append("Compare's first divergence is step ").append(fd.step()).append(", ").append(fd.point()).append(" (rel L2 ")
                .append(dev.decodiff.harness.report.Fmt.sci(fd.relL2())).append(" against ").append(dev.decodiff.harness.report.Fmt.sci(fd.tolerance())).append("), every earlier cell within tolerance. ");
        if (named != null)
            sb.append("Of the ").append(tried).append(" catalog fault").append(tried == 1 ? "" : "s").append(" that change that cell when planted alone, ")
                    .append(named).append(" reproduces the candidate there (rel L2 ").append(dev.decodiff.harness.report.Fmt.sci(v.relL2())).append("; the runner-up, ")
                    .append(v.runnerUp()).append(", ").append(dev.decodiff.harness.report.Fmt.sci(v.runnerUpRelL2())).append("). ");
        else sb.append("No catalog fault is named (").append(tried).append(" change that cell). ");
        var healed = subs.stream().filter(BisectResult.Substitution::healed).toList();
        if (proved == null) {
            if (engine != null) sb.append("Nothing downstream of it is over tolerance, so no substitution can show more.");
        } else if (!healed.isEmpty()) {
            var first = healed.get(0);
            sb.append("Writing the reference's ").append(first.name().replace("+", " and ")).append(" into ").append(engine).append(" at step ")
                    .append(fd.step()).append(" heals ").append(first.scope()).append(" (").append(dev.decodiff.harness.report.Fmt.sci(first.before())).append(" → ")
                    .append(dev.decodiff.harness.report.Fmt.sci(first.after())).append(")");
            for (var x : healed.subList(1, healed.size()))
                sb.append("; written into every layer, it heals ").append(x.scope()).append(" (").append(dev.decodiff.harness.report.Fmt.sci(x.before())).append(" → ")
                        .append(dev.decodiff.harness.report.Fmt.sci(x.after())).append(")");
            sb.append(proved ? ": the error enters at " + fd.point() + "." : "; the rest of the step stays wrong.");
        } else {
            sb.append("No substitution at the culprit heals its layer: the error also enters after it.");
        }
        return sb.toString().strip();
    }

    private static BisectResult without(ComparisonResult cmp, String conclusion, long t0) {
        return new BisectResult(cmp, null, List.of(), List.of(), List.of(), List.of(), null, null, null, conclusion, List.of(), secs(t0), null, null);
    }

    /** ‖x − c‖ / scale: how far a variant's tensor is from the candidate's, on the reference's scale ‖r‖. */
    static double relTo(float[] x, float[] c, double scale) {
        double d = 0;
        for (int i = 0; i < c.length; i++) {
            double e = (double) x[i] - c[i];
            d += e * e;
        }
        if (scale == 0) return d == 0 ? 0 : Double.POSITIVE_INFINITY;
        return Math.sqrt(d) / scale;
    }

    private static double norm(float[] a) {
        double n = 0;
        for (float v : a) n += (double) v * v;
        return Math.sqrt(n);
    }

    private static double secs(long t0) { return (System.nanoTime() - t0) / 1e9; }
}
