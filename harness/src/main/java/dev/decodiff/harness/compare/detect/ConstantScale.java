package dev.decodiff.harness.compare.detect;

/** candidate ≈ α × reference for one constant α, named when it is √n or 1/√n. */
final class ConstantScale implements Detector {
    @Override public boolean appliesTo(String kind) { return true; }

    @Override
    public Finding explain(DetectorContext ctx) {
        var cell = ctx.cell();
        if (!(cell.refNorm() > 0) || !(cell.candNorm() > 0) || Double.isNaN(cell.cosine())) return null;
        double cos = Math.min(1, cell.cosine());
        double sin = Math.sqrt(Math.max(0, 1 - cos * cos));
        double alpha = cell.normRatio() * cos;
        if (sin > ctx.near() || Math.abs(alpha - 1) <= 10 * cell.tolerance()) return null;
        return Finding.of("a constant scale factor: candidate ≈ " + Wording.factor(alpha) + " × reference (norms "
                + Wording.norm(cell.candNorm()) + " vs " + Wording.norm(cell.refNorm()) + ")" + Wording.namedFactor(alpha));
    }
}
