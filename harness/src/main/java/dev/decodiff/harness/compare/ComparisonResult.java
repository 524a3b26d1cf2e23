package dev.decodiff.harness.compare;

import dev.decodiff.harness.dump.DumpManifest;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Everything one comparison found, in causal order; the reports only format it. The verdict: a divergence among the
 * compared cells (or an observer effect) wins; otherwise a comparison that did not cover everything the two sides
 * should hold is incomplete ({@link #completeness()}); only a whole, clean comparison is a match.
 * {@code engineFailure} is set when the candidate engine threw at a step: the comparison ended there, with the
 * steps before it, and that is a divergence.
 */
public record ComparisonResult(
        String reference, String candidate, DumpManifest referenceManifest, int stepsCompared,
        List<CellStats> cells, List<TokenAgreement> tokens, List<String> onlyInReference, List<String> onlyInCandidate,
        FirstDivergence firstDivergence, EngineFailure engineFailure, String observerEffect, List<String> notes, ToleranceProfile profile,
        double seconds, Completeness completeness, DumpManifest.Producer candidateProducer,
        dev.decodiff.harness.compare.attribution.Attributed attribution, ReferenceDisagreement referenceDisagreement) {

    /** Exit codes of the verdicts (the CLI's Main repeats them). */
    public static final int EXIT_MATCH = 0, EXIT_DIVERGENCE = 1, EXIT_INCOMPLETE = 3, EXIT_REFERENCE_DISAGREES = 4;

    /** A comparison without a reference-side finding (the reports' tests and callers that build one by hand). */
    public ComparisonResult(String reference, String candidate, DumpManifest referenceManifest, int stepsCompared,
                            List<CellStats> cells, List<TokenAgreement> tokens, List<String> onlyInReference, List<String> onlyInCandidate,
                            FirstDivergence firstDivergence, EngineFailure engineFailure, String observerEffect, List<String> notes,
                            ToleranceProfile profile, double seconds, Completeness completeness, DumpManifest.Producer candidateProducer,
                            dev.decodiff.harness.compare.attribution.Attributed attribution) {
        this(reference, candidate, referenceManifest, stepsCompared, cells, tokens, onlyInReference, onlyInCandidate, firstDivergence,
                engineFailure, observerEffect, notes, profile, seconds, completeness, candidateProducer, attribution, null);
    }

    public static final String NOT_APPLICABLE = "not_applicable", NOT_CHECKED = "not_checked", NONE = "none";

    public boolean observerEffectFound() {
        return observerEffect != null && !observerEffect.equals(NONE) && !observerEffect.equals(NOT_APPLICABLE)
                && !observerEffect.equals(NOT_CHECKED);
    }

    public boolean diverged() { return firstDivergence != null || engineFailure != null || observerEffectFound(); }

    /**
     * The reference's own op, recomputed from its recorded inputs, is not reproduced by decodiff's description of the
     * model at a cell over tolerance (before any finding on the candidate's side): neither a match nor precision, and
     * not the candidate's divergence either.
     */
    public boolean referenceDisagrees() { return referenceDisagreement != null && !diverged(); }

    /** Every expected cell compared: both sides whole, nothing held by only one side (beyond an explicit selection). */
    public boolean complete() { return completeness.complete(); }

    public boolean incomplete() { return !diverged() && !complete(); }

    /**
     * Every difference is accounted for by the candidate's own rounding: some cell is over tolerance (or a token
     * flips), yet local attribution found each op exact or reproduced by a named precision hypothesis. With every cell
     * within tolerance it is a match, whatever effects the attribution names.
     */
    public boolean precision() {
        return attribution != null && !diverged() && !referenceDisagrees() && complete() && !cells.isEmpty()
                && (failingCells() > 0 || tokens.stream().anyMatch(TokenAgreement::failed));
    }

    public boolean matches() { return !diverged() && !referenceDisagrees() && complete() && !cells.isEmpty() && !precision(); }

    public String verdict() {
        return diverged() ? "divergence" : referenceDisagrees() ? "reference_disagrees" : !complete() ? "incomplete" : precision() ? "precision" : "match";
    }

    public int exitCode() {
        if (diverged()) return EXIT_DIVERGENCE;
        if (referenceDisagrees()) return EXIT_REFERENCE_DISAGREES;
        if (!complete()) return EXIT_INCOMPLETE;
        return precision() && attribution.exact() ? EXIT_DIVERGENCE : EXIT_MATCH;
    }

    public int referenceSteps() { return referenceManifest.stepCount(); }

    /** The worst cell per point kind (embed, attn.q, …, logits), in causal order of the kinds. */
    public Map<String, CellStats> worstByKind() {
        var m = new LinkedHashMap<String, CellStats>();
        cells.stream()
                .sorted(java.util.Comparator.comparingLong((CellStats c) -> dev.decodiff.engine.CapturePoints.causalRank(
                        c.layer() < 0 ? c.point() : dev.decodiff.engine.CapturePoints.layer(0, c.kind()))))
                .forEach(c -> m.merge(c.kind(), c, (a, b) -> worse(b, a) ? b : a));
        return m;
    }

    /** The worst cell overall (by share of its tolerance used). */
    public CellStats worstCell() {
        CellStats w = null;
        for (var c : cells) if (w == null || worse(c, w)) w = c;
        return w;
    }

    static boolean worse(CellStats a, CellStats b) {
        double ua = a.usage(), ub = b.usage();
        if (Double.isNaN(ua)) ua = Double.POSITIVE_INFINITY;
        if (Double.isNaN(ub)) ub = Double.POSITIVE_INFINITY;
        return ua > ub;
    }

    public List<CellStats> cellsOfStep(int step) {
        var out = new ArrayList<CellStats>();
        for (var c : cells) if (c.step() == step) out.add(c);
        return out;
    }

    public int layerCount() {
        int n = referenceManifest.model().numHiddenLayers();
        for (var c : cells) n = Math.max(n, c.layer() + 1);
        return n;
    }

    public long failingCells() { return cells.stream().filter(CellStats::failed).count(); }

    public long tokensWith(TokenAgreement.Status s) { return tokens.stream().filter(t -> t.status() == s).count(); }
}
