package dev.decodiff.harness.compare;

import dev.decodiff.harness.compare.attribution.LocalError;

import java.util.List;

/**
 * The first cell over tolerance, in causal order, whose op on the <b>reference</b> side — recomputed from the
 * reference's own recorded inputs by decodiff's description of the model — does not reproduce the reference within the
 * reference's stated precision. The reference is the independent oracle: when it and the description disagree, either
 * the reference's producer has a bug, the weights are not the ones it ran, or decodiff's ops are wrong (and so is
 * anything of decodiff's that shares them, the live engine included). Nothing downstream of it can be judged.
 *
 * @param reference the reference op's local error at the cell
 */
public record ReferenceDisagreement(int step, String point, CellStats cell, LocalError reference, List<CellStats> upstream) {
    public Integer layer() {
        int l = dev.decodiff.engine.CapturePoints.layerOf(point);
        return l < 0 ? null : l;
    }
}
