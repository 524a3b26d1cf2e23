package dev.decodiff.harness.arch.gemma4.bisect;

import dev.decodiff.engine.arch.Gemma4Architecture;
import dev.decodiff.harness.bisect.Cells;
import dev.decodiff.harness.bisect.ReferenceTensors;
import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.harness.compare.ToleranceProfile;
import dev.decodiff.harness.compare.detect.DetectorContext;
import dev.decodiff.harness.dump.DumpReader;

import java.util.ArrayList;
import java.util.List;

/**
 * How far each enumerated op variant lands from the reference, in tolerances, where it would first show: layer 0 of
 * step 0, recomputed from the reference's own inputs. A variant under 1× would pass compare unseen; under 2× it is
 * caught with little room.
 */
public final class VariantMargins {
    private VariantMargins() {}

    public record Margin(String op, String variant, String point, double relL2, double tolerance) {
        public double margin() { return relL2 / tolerance; }
    }

    private static final List<VariantSearch.Enumerator> ENUMERATORS =
            List.of(new RewireDetector(), new AttentionVariantsDetector());

    public static List<Margin> firstLayer(Gemma4Model model, DumpReader reader, ToleranceProfile profile) {
        var out = new ArrayList<Margin>();
        try (var refs = new ReferenceTensors(reader)) {
            var step = refs.step(0);
            for (String kind : List.of(CapturePoints.PLE, CapturePoints.Q, CapturePoints.K, CapturePoints.V, CapturePoints.ATTN_OUT, CapturePoints.MLP_OUT,
                    CapturePoints.MOE_OUT, CapturePoints.OUT)) {
                String p = kind.equals(CapturePoints.PLE) ? kind : CapturePoints.layer(0, kind);
                if (!step.has(p)) continue;
                double tol = profile.tolerance(p);
                var r = step.tensor(p);
                var cell = Cells.of(0, p, r, r, tol);
                var ctx = new DetectorContext(cell, step, step, DetectorContext.nearEqual(tol), Gemma4Architecture.INSTANCE.wrap(model), refs);
                for (var e : ENUMERATORS) {
                    if (!e.appliesTo(kind)) continue;
                    var h = e.hypotheses(ctx);
                    if (h == null || Recompute.rel(h.standard(), r, 0) > ctx.near()) continue;
                    for (var v : h.variants()) {
                        float[] o = v.output().get();
                        // a variant that changes nothing on this input (a tie rule without ties) has no margin to show
                        if (o != null && !java.util.Arrays.equals(o, h.standard())) out.add(new Margin(v.opOr(h.op()), v.name(), p, Recompute.rel(o, r, 0), tol));
                    }
                }
            }
        }
        return out;
    }
}
