package dev.decodiff.harness.compare;

import dev.decodiff.harness.report.Fmt;
import dev.decodiff.engine.CapturePoints;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.PartClock;
import dev.decodiff.harness.dump.DumpManifest;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.dump.ReadRows;
import dev.decodiff.harness.dump.StepTensors;
import dev.decodiff.harness.compare.attribution.OpAttribution;
import dev.decodiff.harness.compare.attribution.LocalError;
import dev.decodiff.metal.TensorView;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.IntConsumer;

/**
 * Compares a candidate against a reference dump step by step (one step of each mapped at a time): every point both
 * sides have, in causal order, plus the greedy token per step; finds the first divergence and explains it.
 */
public final class Comparison {
    private Comparison() {}

    /** Orders point names causally (docs/dump-format.md), unknown names after known ones, then by name. */
    public static final Comparator<String> CAUSAL =
            Comparator.comparingLong(CapturePoints::causalRank).thenComparing(Comparator.naturalOrder());

    private static final int UPSTREAM = 4;

    /**
     * @param attribution when set, every cell is also charged with its local error (its op recomputed from the
     *                    candidate's own inputs), and the verdict rests on that: drift inherited from upstream and
     *                    named precision effects are reported, not divergences
     * @param exact       with attribution: named precision effects fail the comparison too (exit 1)
     */
    public record Options(ToleranceProfile profile, boolean allowMismatch, IntConsumer progress,
                          dev.decodiff.harness.compare.attribution.OpAttribution attribution, boolean exact) {
        public Options {
            Objects.requireNonNull(profile);
            if (progress == null) progress = s -> {};
        }

        public Options(ToleranceProfile profile, boolean allowMismatch, IntConsumer progress) {
            this(profile, allowMismatch, progress, null, false);
        }

        public Options withAttribution(dev.decodiff.harness.compare.attribution.OpAttribution a, boolean exact) {
            return new Options(profile, allowMismatch, progress, a, exact);
        }

        public static Options defaults() { return new Options(ToleranceProfile.defaults(), false, null); }
    }

    /**
     * Two dumps must come from the same checkpoint and feed the same tokens. Returns the warnings that
     * {@code allowMismatch} turned into notes; without it, any mismatch is bad input.
     */
    public static List<String> checkIdentity(DumpManifest ref, Path refFile, DumpManifest cand, Path candFile, boolean allowMismatch) {
        var notes = new ArrayList<String>();
        String hint = "; compare dumps of the same checkpoint, or pass --allow-mismatch to compare anyway";
        if (quantizationDiffers(ref.producer(), cand.producer())) {
            var rq = ref.producer().quantization();
            var cq = cand.producer().quantization();
            String what = rq == null || cq == null
                    ? "ran " + DumpManifest.weights(cq) + " but the reference (" + refFile + ") ran " + DumpManifest.weights(rq)
                    : "states another quantization than the reference (" + refFile + "), candidate vs reference: " + String.join("; ", cq.differences(rq));
            mismatch(notes, allowMismatch, candFile, what + ": a different model" + hint);
        }
        if (!Objects.equals(ref.model().configSha256(), cand.model().configSha256()))
            mismatch(notes, allowMismatch, candFile, "was made from another checkpoint: config_sha256 " + abbrev(cand.model().configSha256())
                    + "… but the reference (" + refFile + ") has " + abbrev(ref.model().configSha256()) + "…" + hint);
        String rw = ref.model().weightsSha256(), cw = cand.model().weightsSha256();
        if (rw != null && cw != null && !rw.equals(cw))
            mismatch(notes, allowMismatch, candFile, "was made from other weights: weights_sha256 " + abbrev(cw)
                    + "… but the reference (" + refFile + ") has " + abbrev(rw) + "…" + hint);
        int steps = Math.min(ref.stepCount(), cand.stepCount());
        for (int s = 0; s < steps; s++) {
            var a = ref.step(s);
            var b = cand.step(s);
            if (a.start() != b.start() || a.length() != b.length())
                throw new BadInputException(candFile, "step " + s + " feeds positions [" + b.start() + ", " + b.end()
                        + ") but the reference's feeds [" + a.start() + ", " + a.end() + "); make the candidate step like the reference (teacher-forced on its tokens)");
        }
        int fed = steps == 0 ? 0 : ref.step(steps - 1).end();
        for (int i = 0; i < fed; i++) {
            int rt = ref.tokens().get(i), ct = cand.tokens().get(i);
            if (rt != ct) {
                mismatch(notes, allowMismatch, candFile, "feeds other tokens than the reference: position " + i + " is " + ct
                        + " but the reference (" + refFile + ") has " + rt + "; teacher-force the candidate on the reference's tokens (decodiff dump --reference), or pass --allow-mismatch");
                break;
            }
        }
        return notes;
    }

    /**
     * Whether two producers that both state their weights' quantization (decodiff always does; other producers when
     * they record it) ran different ones: float against quantized, or other bits, group sizes or overrides.
     */
    public static boolean quantizationDiffers(DumpManifest.Producer ref, DumpManifest.Producer cand) {
        if (ref == null || cand == null || !ref.statesQuantization() || !cand.statesQuantization()) return false;
        var a = ref.quantization();
        var b = cand.quantization();
        if (a == null || b == null) return a != b;
        return !a.differences(b).isEmpty();
    }

    private static void mismatch(List<String> notes, boolean allow, Path file, String what) {
        if (!allow) throw new BadInputException(file, what);
        notes.add(file + " " + what.replaceAll("; compare dumps.*|; teacher-force.*", "") + " (compared anyway: --allow-mismatch)");
    }

    static String abbrev(String sha) { return sha == null ? "null" : sha.substring(0, Math.min(12, sha.length())); }

    public static ComparisonResult run(DumpReader ref, CandidateSource cand, Options opt) { return run(ref, cand, opt, List.of()); }

    public static ComparisonResult run(DumpReader ref, CandidateSource cand, Options opt, List<String> notesIn) {
        long t0 = System.nanoTime();
        var profile = opt.profile();
        var notes = new ArrayList<>(notesIn);
        var cells = new ArrayList<CellStats>();
        var tokens = new ArrayList<TokenAgreement>();
        var onlyRef = new TreeSet<>(CAUSAL);
        var onlyCand = new TreeSet<>(CAUSAL);
        FirstDivergence first = null;
        EngineFailure failure = null;
        int steps = Math.min(ref.stepCount(), cand.stepCount());
        var rows = new Rows(ref.readRows(), cand.readRows());
        if (opt.attribution() != null)
            opt = opt.withAttribution(opt.attribution().stating(cand.producer() == null ? null : cand.producer().dtype()), opt.exact());
        var attribution = opt.attribution();
        // the reference's own ops, recomputed from its own recorded inputs by the same description of the model
        var refAttribution = attribution == null ? null
                : attribution.forReference(ref.manifest().producer() == null ? null : ref.manifest().producer().dtype());
        var accounting = new Accounting();
        ReferenceDisagreement disagreement = null;
        int[] fed = ref.manifest().tokenArray();
        try (var closer = new StepCloser(); var staging = new NativeStaging()) {
            for (int s = 0; s < steps; s++) {
                StepTensors r, c = null;
                try (var part = PartClock.enter("reference_reads")) {
                    r = ref.readStep(s);
                }
                try {
                    var stepCells = new ArrayList<CellStats>();
                    if (attribution != null) {
                        var st = ref.manifest().step(s);
                        attribution.beginStep(s, st.start(), st.length(), fed);
                        refAttribution.beginStep(s, st.start(), st.length(), fed);
                    }
                    try {
                        c = cand instanceof StreamingCandidate live
                                ? streamStep(s, r, live, opt, notes, staging, stepCells, onlyRef, onlyCand, rows)
                                : wholeStep(s, r, cand, opt, notes, stepCells, onlyRef, onlyCand, rows);
                        if (attribution != null && !(cand instanceof StreamingCandidate)) attributeStep(c, stepCells, attribution);
                        // the reference is attributed where a cell is over tolerance: each such cell's error must be accounted for
                        if (attribution != null && stepCells.stream().anyMatch(CellStats::failed)) attributeStep(r, stepCells, refAttribution);
                        else if (attribution != null) carryStep(r, refAttribution);
                    } catch (EngineThrewException e) {
                        failure = e.failure();
                        break;
                    }
                    cells.addAll(stepCells);
                    var tok = TokenAgreement.of(s, r.nextToken(), c.nextToken(), r.top2Margin(), profile.nearTie());
                    tokens.add(tok);
                    if (attribution != null) {
                        attribution.endStep();
                        refAttribution.endStep();
                    }
                    if (first == null && disagreement == null) {
                        if (attribution == null) first = firstIn(stepCells, tok, r, c);
                        else {
                            var found = firstFinding(stepCells, attribution, refAttribution, r, c, accounting);
                            if (found instanceof ReferenceDisagreement d) disagreement = d;
                            else first = (FirstDivergence) found;
                        }
                    }
                } finally {
                    closer.closeLater(r, c);
                }
                opt.progress().accept(s + 1);
            }
        }
        if (failure != null) steps = failure.step();
        if (cells.isEmpty() && failure == null)
            throw new BadInputException(cand.describe() + ": shares no capture point with the reference (" + ref.dir()
                    + ", which has " + String.join(", ", causalOrder(ref.allPoints()).stream().limit(6).toList())
                    + (ref.allPoints().size() > 6 ? ", …" : "") + "); record the points of docs/dump-format.md under their contract names");
        String observer = cand.observerEffect();
        if (cand.note() != null) notes.add(cand.note());
        var completeness = completeness(ref, cand, onlyRef, onlyCand, notes);
        var attributed = attribution == null ? null
                : dev.decodiff.harness.compare.attribution.Attributed.of(attribution, refAttribution, cells, opt.exact());
        if (attributed != null && first == null && disagreement == null && failure == null)
            first = unaccountedAtEnd(cells, tokens, attributed);
        if (attribution == null && cells.stream().anyMatch(CellStats::failed))
            notes.add("largest error jumps over their causal inputs (without the checkpoint no op is recomputed, so this ranks, not judges): "
                    + ErrorJumps.describe(ErrorJumps.largest(cells, 3)));
        return new ComparisonResult(ref.dir().toString(), cand.describe(), ref.manifest(), steps, List.copyOf(cells),
                List.copyOf(tokens), List.copyOf(onlyRef), List.copyOf(onlyCand), first, failure, observer, List.copyOf(notes),
                profile, (System.nanoTime() - t0) / 1e9, completeness, cand.producer(), attributed, disagreement);
    }

    /** Whether a named precision effect has been met so far in causal order, on either side. */
    private static final class Accounting {
        boolean effectSeen;
    }

    /**
     * Over-tolerance cells (or a token flip) that no named effect anywhere accounts for are never precision: with every
     * op exact on both sides, a disagreement beyond tolerance has no explanation but one nobody measured. Null when
     * nothing is over tolerance or some effect was named.
     */
    private static FirstDivergence unaccountedAtEnd(List<CellStats> cells, List<TokenAgreement> tokens,
                                                    dev.decodiff.harness.compare.attribution.Attributed a) {
        if (a.hasEffects()) return null;
        for (var c : cells)
            if (c.failed()) return new FirstDivergence(c.step(), c.point(), c, List.of(), null, null, null, UNACCOUNTED);
        for (var t : tokens)
            if (t.failed()) return new FirstDivergence(t.step(), CapturePoints.LOGITS, null, List.of(),
                    "the greedy token flips (reference " + t.reference() + ", candidate " + t.candidate() + "), and no named precision effect accounts for it",
                    t, null, UNACCOUNTED);
        return null;
    }

    static final String UNACCOUNTED = "over tolerance, yet its op and every op before it are exact on both sides and no precision"
            + " effect is named anywhere upstream: nothing accounts for this error";

    /**
     * Weighs what was not compared. A point only the reference holds is excused when the candidate recorded an
     * explicit selection that leaves it out (the report states the exclusion); otherwise it makes the comparison
     * incomplete. A point only the candidate holds is listed, never a shortfall ({@link Completeness}).
     */
    private static Completeness completeness(DumpReader ref, CandidateSource cand, Set<String> onlyRef, Set<String> onlyCand,
                                             List<String> notes) {
        var missingInCand = new ArrayList<String>();
        var missingInRef = new ArrayList<String>();
        var excluded = new ArrayList<String>();
        var candSel = cand.selectedPoints() == null ? null : dev.decodiff.harness.dump.PointSelection.of(cand.selectedPoints());
        var refSel = ref.manifest().selectedPoints() == null ? null : dev.decodiff.harness.dump.PointSelection.of(ref.manifest().selectedPoints());
        int byCand = 0, byRef = 0;
        for (String p : onlyRef) {
            if (candSel != null && !candSel.test(p)) { excluded.add(p); byCand++; }
            else missingInCand.add(p);
        }
        for (String p : onlyCand) {
            if (refSel != null && !refSel.test(p)) { excluded.add(p); byRef++; }
            else missingInRef.add(p);
        }
        if (byCand > 0) notes.add("excluded by choice: the candidate recorded only the points selected by --points " + candSel
                + ", leaving out " + byCand + " of the reference's points (" + Completeness.abbreviate(excluded.subList(0, byCand)) + ")");
        if (byRef > 0) notes.add("excluded by choice: the reference recorded only the points selected by --points " + refSel
                + ", so " + byRef + " of the candidate's points were not compared (" + Completeness.abbreviate(excluded.subList(byCand, excluded.size())) + ")");
        var gaps = new ArrayList<String>();
        ref.gaps().forEach(g -> gaps.add("reference: " + g));
        cand.gaps().forEach(g -> gaps.add("candidate: " + g));
        return new Completeness(ref.stepCount(), cand.stepCount(), missingInCand, missingInRef, excluded, gaps);
    }

    /** Step s of a candidate that hands over a whole step (a dump): every shared cell, in causal order. */
    private static StepTensors wholeStep(int s, StepTensors r, CandidateSource cand, Options opt, List<String> notes,
                                         List<CellStats> stepCells, Set<String> onlyRef, Set<String> onlyCand, Rows rows) {
        var c = cand.step(s);
        var shared = new ArrayList<String>();
        for (String p : r.points()) {
            if (c.points().contains(p)) shared.add(p);
            else onlyRef.add(p);
        }
        for (String p : c.points()) if (!r.points().contains(p)) onlyCand.add(p);
        var common = sortedCausally(shared);
        int n = common.size();
        var rv = new TensorView[n];
        var cv = new TensorView[n];
        for (int i = 0; i < n; i++) {
            var pair = rows.align(common.get(i), r.tensor(common.get(i)), c.tensor(common.get(i)), notes);
            rv[i] = pair[0];
            cv[i] = pair[1];
        }
        var sums = StepSums.of(rv, cv);
        for (int i = 0; i < n; i++) {
            String p = common.get(i);
            stepCells.add(cell(s, p, rv[i], cv[i], r.origin(), c.origin(), opt.profile().tolerance(p), opt.allowMismatch(), notes, sums[i]));
        }
        return c;
    }

    /**
     * Step s of a streaming candidate (the live engine): each tensor is compared against the mapped reference as the
     * engine produces it and then let go, so the heap holds one tensor, not a step. Only the candidate's tensor of the
     * causally first failing cell is kept, for the diagnosis. The cells are the same, in the same causal order, with
     * the same sums ({@link CellKernel}'s are the same bits however a tensor is staged or split).
     */
    private static StepTensors streamStep(int s, StepTensors r, StreamingCandidate live, Options opt, List<String> notes,
                                          NativeStaging staging, List<CellStats> stepCells, Set<String> onlyRef, Set<String> onlyCand,
                                          Rows rows) {
        var seen = new HashSet<String>();
        var kept = new TensorView[2]; // the first failing cell whose own op is a finding, and the first failing cell
        String origin = live.describe() + ", step " + s;
        ReadAhead ahead;
        try (var part = PartClock.enter("reference_reads")) {
            ahead = ReadAhead.of(r);
        }
        var end = live.stream(s, ct -> {
            try (var part = PartClock.enter("compare")) {
                compareStreamed(s, r, ct, opt, notes, staging, stepCells, seen, onlyCand, rows, kept, origin, ahead);
            }
        });
        for (String p : r.points()) if (!seen.contains(p)) onlyRef.add(p);
        var order = new HashMap<String, Integer>();
        var causal = sortedCausally(seen);
        for (int i = 0; i < causal.size(); i++) order.put(causal.get(i), i);
        stepCells.sort(Comparator.comparingInt(c -> order.get(c.point())));
        return new StreamedStep(r, kept[0] != null ? kept[0] : kept[1], end);
    }

    /** One tensor of a streamed step against its mapped reference: its cell, its attribution, its pages let go. */
    private static void compareStreamed(int s, StepTensors r, TensorView ct, Options opt, List<String> notes, NativeStaging staging,
                                        List<CellStats> stepCells, Set<String> seen, Set<String> onlyCand, Rows rows, TensorView[] kept,
                                        String origin, ReadAhead ahead) {
        String p = ct.name();
        seen.add(p);
        if (!r.points().contains(p)) {
            onlyCand.add(p);
            if (opt.attribution() != null) {
                try (var part = PartClock.enter("attribution")) {
                    opt.attribution().accept(p, ct, false);
                }
            }
            return;
        }
        TensorView mapped;
        try (var part = PartClock.enter("reference_reads")) {
            if (ahead != null) ahead.after(p);
            mapped = r.tensor(p);
            if (mapped.data().isMapped()) mapped.data().load(); // its pages read in here, so the kernels' time is theirs alone
        }
        var pair = rows.align(p, mapped, ct, notes);
        var rt = pair[0];
        var cv = pair[1];
        CellKernel.Sums sums = null;
        if (Arrays.equals(rt.shape(), cv.shape()) && rt.dtype() == cv.dtype()) {
            TensorView staged;
            try (var part = PartClock.enter("staging")) {
                staged = staging.stage(cv);
            }
            sums = StepSums.of(new TensorView[]{rt}, new TensorView[]{staged})[0];
        }
        var cell = cell(s, p, rt, cv, r.origin(), origin, opt.profile().tolerance(p), opt.allowMismatch(), notes, sums);
        stepCells.add(cell);
        if (opt.attribution() != null) {
            try (var part = PartClock.enter("attribution")) {
                opt.attribution().accept(p, ct, cell.failed());
            }
        }
        if (cell.failed()) {
            var local = opt.attribution() == null ? null : opt.attribution().error(s, p);
            boolean finding = local == null || !local.accounted();
            if (finding && (kept[0] == null || CAUSAL.compare(p, kept[0].name()) < 0)) kept[0] = ct;
            if (kept[1] == null || CAUSAL.compare(p, kept[1].name()) < 0) kept[1] = ct;
        }
        releasePages(mapped);
    }

    /**
     * Lets go of a compared reference tensor's resident pages: the mapping of a long prompt's prefill step is
     * gigabytes (a 4,096-token prompt on an E2B-sized model: 5.2 GB), and every page of it the comparison read would
     * otherwise stay in the process's resident set until the step is closed, on top of the mapped weights. The pages
     * stay in the page cache; a later read of the tensor (a diagnosis) maps them in again.
     */
    private static void releasePages(TensorView t) {
        if (t.data().isMapped()) t.data().unload();
    }

    private static boolean onDeclaredRows(CellStats cell, StepTensors r, StepTensors c) {
        String p = cell.point();
        if (cell.shapeNote() != null || !r.points().contains(p) || !c.points().contains(p)) return false;
        return !Arrays.equals(r.tensor(p).shape(), c.tensor(p).shape());
    }

    /** A whole candidate step fed to the attribution in causal order, each point with its cell's verdict. */
    /** A step with nothing over tolerance: the reference side keeps only what a later step's ops read. */
    private static void carryStep(StepTensors r, OpAttribution a) {
        for (String p : sortedCausally(r.points()))
            if (a.carriesAcrossSteps(CapturePoints.kindOf(p))) a.accept(p, r.tensor(p), false);
    }

    private static void attributeStep(StepTensors c, List<CellStats> stepCells, dev.decodiff.harness.compare.attribution.OpAttribution a) {
        var failed = new HashMap<String, Boolean>();
        for (var cell : stepCells) failed.put(cell.point(), cell.failed());
        for (String p : sortedCausally(c.points())) a.accept(p, c.tensor(p), failed.getOrDefault(p, false));
    }

    /**
     * With attribution, the first finding in causal order, on either side. A cell over tolerance is accounted for when
     * its error splits into what each side's op added (each exact or a named precision effect: the candidate's op from
     * the candidate's inputs, the reference's op from the reference's) and what their inputs carried from upstream cells,
     * themselves accounted for — an exact identity, c − r = (c − f(c_in)) + (f(c_in) − f(r_in)) + (f(r_in) − r). So:
     * <ul>
     *   <li>a cell over tolerance whose reference op the description does not reproduce within the reference's stated
     *       precision: the reference and the description disagree ({@link ReferenceDisagreement});</li>
     *   <li>a cell whose candidate op is over fp32 noise and not a named precision effect, or over tolerance and not
     *       measurable (missing inputs never count as agreement, unless a composite op that contains the cell —
     *       the layer's out — was measured and accounted for): a divergence;</li>
     *   <li>with every cell measured, a cell over tolerance with no named effect at or before it on either side: a
     *       divergence, since nothing accounts for it.</li>
     * </ul>
     * Cells over tolerance whose ops are exact only inherit drift; a token flip is then drift too.
     */
    private static Object firstFinding(List<CellStats> stepCells, OpAttribution a, OpAttribution ra, StepTensors r, StepTensors c,
                                       Accounting accounting) {
        for (int i = 0; i < stepCells.size(); i++) {
            var cell = stepCells.get(i);
            var local = a.error(cell.step(), cell.point());
            var refLocal = ra.error(cell.step(), cell.point());
            if (isPrecision(local) || isPrecision(refLocal)) accounting.effectSeen = true;
            var upstream = List.copyOf(stepCells.subList(Math.max(0, i - UPSTREAM), i));
            if (cell.failed() && refLocal != null && refLocal.unexplained())
                return new ReferenceDisagreement(cell.step(), cell.point(), cell, refLocal, upstream);
            boolean finding = local == null ? cell.failed()
                    : local.unexplained() || (cell.failed() && local.status() == LocalError.Status.UNATTRIBUTED && !coveredByLayer(a, cell));
            boolean unaccounted = !finding && cell.failed() && a.measuresEveryCell() && !accounting.effectSeen;
            if (!finding && !unaccounted) continue;
            dev.decodiff.harness.compare.detect.Finding why = null;
            try {
                why = onDeclaredRows(cell, r, c) ? null : Diagnosis.find(cell, r, c);
            } catch (IllegalStateException notKept) {
                // a streamed step keeps one candidate tensor; without it there is no diagnosis, the finding stands
            }
            return new FirstDivergence(cell.step(), cell.point(), cell, upstream, why == null ? null : why.sentence(), null,
                    why == null ? null : why.variant(), unaccounted ? UNACCOUNTED : null);
        }
        return null;
    }

    private static boolean isPrecision(LocalError e) { return e != null && e.status() == LocalError.Status.PRECISION; }

    /** An unmeasurable cell inside a layer whose out was recomputed as a composite op and accounted for. */
    private static boolean coveredByLayer(OpAttribution a, CellStats cell) {
        if (cell.layer() < 0) return false;
        var out = a.error(cell.step(), CapturePoints.layer(cell.layer(), CapturePoints.OUT));
        return out != null && out.granularity() != null && out.accounted();
    }

    private static FirstDivergence firstIn(List<CellStats> stepCells, TokenAgreement tok, StepTensors r, StepTensors c) {
        for (int i = 0; i < stepCells.size(); i++) {
            var cell = stepCells.get(i);
            if (cell.passed()) continue;
            var upstream = new ArrayList<>(stepCells.subList(Math.max(0, i - UPSTREAM), i));
            // a cell judged on declared last rows (ReadRows) has no whole pair of tensors for the detectors to read
            var why = onDeclaredRows(cell, r, c) ? null : Diagnosis.find(cell, r, c);
            return new FirstDivergence(cell.step(), cell.point(), cell, List.copyOf(upstream), why == null ? null : why.sentence(), null,
                    why == null ? null : why.variant());
        }
        if (tok.failed()) {
            var upstream = stepCells.subList(Math.max(0, stepCells.size() - UPSTREAM), stepCells.size());
            return new FirstDivergence(tok.step(), CapturePoints.LOGITS, null, List.copyOf(upstream),
                    "the greedy token flips (reference " + tok.reference() + ", candidate " + tok.candidate() + ") although the reference's top-2 margin is "
                            + Fmt.format("%.3g", tok.referenceMargin()) + ", above the near-tie threshold", tok);
        }
        return null;
    }

    /**
     * Both sides' declared cuts of their k_read/v_read rows ({@link ReadRows}): a cell one of them makes comparable is
     * judged on the declared last rows, and the report says so once.
     */
    record Rows(ReadRows ref, ReadRows cand) {
        static final String NOTE = "k_read/v_read compared on the last positions read only: ";

        TensorView[] align(String point, TensorView rt, TensorView ct, List<String> notes) {
            var pair = ReadRows.align(point, rt, ct, ref, cand);
            if ((pair[0] != rt || pair[1] != ct) && notes.stream().noneMatch(n -> n.startsWith(NOTE))) {
                boolean byCand = pair[0] != rt;
                notes.add(NOTE + (byCand ? "the candidate" : "the reference") + " declares read_rows " + (byCand ? cand : ref)
                        + " (it kept the last " + (byCand ? cand : ref).last() + " rows of each read)");
            }
            return pair;
        }
    }

    private static CellStats cell(int s, String p, TensorView rt, TensorView ct, String rOrigin, String cOrigin, double tol,
                                  boolean allowMismatch, List<String> notes, CellKernel.Sums pre) {
        if (!Arrays.equals(rt.shape(), ct.shape())) {
            String kind = CapturePoints.kindOf(p);
            boolean readAxisOnly = CapturePoints.isCacheRead(kind) && rt.rank() == ct.rank() && rt.rank() >= 1
                    && Arrays.equals(Arrays.copyOfRange(rt.shape(), 1, rt.rank()), Arrays.copyOfRange(ct.shape(), 1, ct.rank()));
            if (readAxisOnly) return CellStats.shapeMismatch(s, p, rt.shape(), ct.shape(), tol);
            throw new BadInputException(cOrigin + ": tensor '" + p + "' has shape " + Arrays.toString(ct.shape())
                    + " but the reference's (" + rOrigin + ") is " + Arrays.toString(rt.shape())
                    + "; both sides must store capture points in the shapes of docs/dump-format.md");
        }
        if (rt.dtype() != ct.dtype()) {
            String what = "tensor '" + p + "' is " + ct.dtype() + " but the reference's (" + rOrigin + ") is " + rt.dtype();
            if (!allowMismatch)
                throw new BadInputException(cOrigin + ": " + what + "; store both sides in the same dtype (float32), or pass --allow-mismatch");
            if (notes.stream().noneMatch(n -> n.startsWith("dtype")))
                notes.add("dtype differs (" + ct.dtype() + " vs " + rt.dtype() + ", first at step " + s + " " + p + "): compared anyway (--allow-mismatch)");
        }
        if (rt.elementCount() == 0)
            throw new BadInputException(rOrigin + ": tensor '" + p + "' has shape " + Arrays.toString(rt.shape())
                    + " and holds no values, so there is nothing to compare; every tensor holds at least one value (docs/dump-format.md)");
        var sums = pre != null ? pre : CellKernel.sums(rt, ct);
        if (sums.nonFiniteRef() > 0)
            throw new BadInputException(rOrigin + ": reference tensor '" + p + "' holds " + sums.nonFiniteRef()
                    + " NaN/Inf values; a reference must be finite — re-create it (float32)");
        // rel L2 divides by ‖r‖: against zeros every candidate is "infinitely" wrong, or right when it is zero too. A
        // state read of zeros is the one computed value that can be: a producer that dropped its state at a step's start
        // reads zeros, and that is evidence to judge (its own state written at the step before says which side lost it).
        String kind = CapturePoints.kindOf(p);
        boolean stateRead = kind.equals(CapturePoints.LINEAR_CONV_STATE_READ) || kind.equals(CapturePoints.LINEAR_STATE_READ);
        if (sums.rr() == 0 && !stateRead)
            throw new BadInputException(rOrigin + ": reference tensor '" + p + "' is all zeros, which no computed activation is;"
                    + " its producer stored nothing there — re-create the reference (or leave the point out of it)");
        return CellStats.of(s, p, rt.shape(), sums, tol);
    }

    /** All points of a set in causal order. */
    public static List<String> causalOrder(Set<String> points) { return sortedCausally(points); }

    /**
     * Distinct points in {@link #CAUSAL} order, each ranked once: the rank parses the name, and a sort compares each
     * of a step's hundreds of points many times.
     */
    private static List<String> sortedCausally(Collection<String> points) {
        record Ranked(long rank, String point) {}
        return points.stream().map(p -> new Ranked(CapturePoints.causalRank(p), p))
                .sorted(Comparator.comparingLong(Ranked::rank).thenComparing(Ranked::point))
                .map(Ranked::point).collect(java.util.stream.Collectors.toCollection(ArrayList::new));
    }

    /** The candidate source for a dump folder. */
    public static CandidateSource dumpSource(DumpReader cand) {
        return new CandidateSource() {
            @Override public String describe() { return cand.dir().toString(); }
            @Override public int stepCount() { return cand.stepCount(); }
            @Override public StepTensors step(int s) { return cand.readStep(s); }
            @Override public List<String> gaps() { return cand.gaps(); }
            @Override public List<String> selectedPoints() { return cand.manifest().selectedPoints(); }
            @Override public ReadRows readRows() { return cand.readRows(); }
            @Override public DumpManifest.Producer producer() { return cand.manifest().producer(); }
        };
    }

    /** Convenience: compare two dump folders (identity checked). */
    public static ComparisonResult compareDumps(Path reference, Path candidate, Options opt) {
        var ref = DumpReader.open(reference);
        var cand = DumpReader.openCandidate(candidate);
        var notes = checkIdentity(ref.manifest(), ref.manifestFile(), cand.manifest(), cand.manifestFile(), opt.allowMismatch());
        return run(ref, dumpSource(cand), opt, notes);
    }

    static Set<String> union(Set<String> a, Set<String> b) {
        var u = new LinkedHashSet<>(a);
        u.addAll(b);
        return u;
    }
}
