package dev.decodiff.harness.compare;

import dev.decodiff.harness.compare.detect.Finding;

import java.util.List;

/**
 * The first failure in causal order (step, then docs/dump-format.md's order inside the step): a cell over tolerance or with
 * NaN/Inf, or — when every cell passes — a greedy token that flips by more than a near-tie. {@code upstream} are the
 * cells just before it in the same step, whose margins show where the numbers were still clean. {@code variant}: the op
 * variant the diagnosis named, when it named one.
 */
public record FirstDivergence(int step, String point, CellStats cell, List<CellStats> upstream, String diagnosis,
                              TokenAgreement token, Finding.Variant variant, String unaccounted) {
    /**
     * @param unaccounted set when the cell is a finding not because an op is wrong but because nothing accounts for its
     *                    error (every op exact on both sides, no precision effect named): why, in words
     */
    public FirstDivergence {}

    public FirstDivergence(int step, String point, CellStats cell, List<CellStats> upstream, String diagnosis, TokenAgreement token,
                           Finding.Variant variant) {
        this(step, point, cell, upstream, diagnosis, token, variant, null);
    }

    /** A first divergence whose diagnosis (if any) names no op variant. */
    public FirstDivergence(int step, String point, CellStats cell, List<CellStats> upstream, String diagnosis, TokenAgreement token) {
        this(step, point, cell, upstream, diagnosis, token, null);
    }

    public Integer layer() {
        int l = dev.decodiff.engine.CapturePoints.layerOf(point);
        return l < 0 ? null : l;
    }

    public double relL2() { return cell == null ? Double.NaN : cell.relL2(); }

    public double tolerance() { return cell == null ? Double.NaN : cell.tolerance(); }
}
