package dev.decodiff.harness.arch.gemma4.bisect;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.harness.compare.detect.Detector;
import dev.decodiff.harness.compare.detect.DetectorContext;
import dev.decodiff.harness.compare.detect.Finding;
import dev.decodiff.harness.report.Fmt;

/**
 * For a layer's out off by a constant factor: names the factor when it is 1/layer_scalar (not applied) or
 * layer_scalar (twice). A supplement: it adds the name to the constant-scale finding.
 */
final class LayerScalarDetector implements Detector {
    @Override public boolean appliesTo(String kind) { return kind.equals(CapturePoints.OUT); }

    @Override public boolean supplements() { return true; }

    @Override
    public Finding explain(DetectorContext ctx) {
        var cell = ctx.cell();
        var model = Gemma4Context.model(ctx);
        if (model == null || cell.layer() < 0) return null;
        if (!(cell.refNorm() > 0) || Double.isNaN(cell.cosine()) || cell.cosine() < 0.999) return null;
        double alpha = cell.normRatio() * cell.cosine();
        double s = model.weights().layers().get(cell.layer()).layerScalar();
        if (s == 1 || s == 0) return null;
        if (Math.abs(alpha * s - 1) < 1e-3)
            return Finding.variant("layer_scalar", "not applied", Fmt.num(alpha, 4) + " = 1 / layer_scalar (" + Fmt.num(s, 4) + ") of layer " + cell.layer() + ": the layer scalar is not applied");
        if (Math.abs(alpha / s - 1) < 1e-3)
            return Finding.variant("layer_scalar", "applied twice", Fmt.num(alpha, 4) + " = layer_scalar (" + Fmt.num(s, 4) + ") of layer " + cell.layer() + ": the layer scalar is applied twice");
        return null;
    }
}
