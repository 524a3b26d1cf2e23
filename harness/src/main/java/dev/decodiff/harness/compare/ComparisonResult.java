package dev.decodiff.harness.compare;

import dev.decodiff.harness.dump.DumpManifest;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** Everything one comparison found, in causal order; the reports only format it. */
public record ComparisonResult(
        String reference, String candidate, DumpManifest referenceManifest, int stepsCompared,
        List<CellStats> cells, List<TokenAgreement> tokens, List<String> onlyInReference, List<String> onlyInCandidate,
        FirstDivergence firstDivergence, String observerEffect, List<String> notes, ToleranceProfile profile,
        double seconds) {

    public static final String NOT_APPLICABLE = "not_applicable", NOT_CHECKED = "not_checked", NONE = "none";

    public boolean observerEffectFound() {
        return observerEffect != null && !observerEffect.equals(NONE) && !observerEffect.equals(NOT_APPLICABLE)
                && !observerEffect.equals(NOT_CHECKED);
    }

    public boolean matches() { return firstDivergence == null && !observerEffectFound() && !cells.isEmpty(); }

    public String verdict() { return matches() ? "match" : "divergence"; }

    public int exitCode() { return matches() ? 0 : 1; }

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
