package dev.decodiff.harness.calibrate;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.decodiff.engine.CapturePoints;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.compare.CellStats;
import dev.decodiff.harness.compare.Comparison;
import dev.decodiff.harness.compare.ComparisonResult;
import dev.decodiff.harness.compare.ToleranceProfile;
import dev.decodiff.harness.dump.DumpReader;

import java.math.BigDecimal;
import java.math.MathContext;
import java.math.RoundingMode;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.function.IntConsumer;

/**
 * Tolerances from the noise floor: two references of one model and one token sequence that differ only in
 * precision (transformers in float32 and in bfloat16) are compared cell by cell, and each point kind's tolerance
 * becomes {@code factor} × the worst rel L2 that kind shows, rounded up to two digits and never below the fp32
 * default of {@link ToleranceProfile}. A candidate computed in bf16 is then judged against the fp32 reference with
 * the headroom that precision alone needs, and no more (docs/tolerances.md, "Calibrated profiles").
 *
 * <p>The near-tie threshold becomes 2 × the largest |Δ logit| between the references: a top-2 margin moves by at
 * most the change of its two logits, so a flip whose margin is below that can be precision noise alone.
 */
public final class Calibration {
    public static final double DEFAULT_FACTOR = 3.0;

    /** One point kind (or, with per-layer calibration, one point): how noisy it is and the tolerance it gets. */
    public record Entry(String key, int cells, double median, double max, CellStats worst, double floor, double tolerance) {}

    public record Result(String reference, String noisy, String referenceDtype, String noisyDtype, double factor,
                         boolean perLayer, int steps, int cells, List<Entry> kinds, List<Entry> points,
                         double maxAbsLogitDiff, double nearTie, double fallback, List<String> notes) {

        /** The profile, in the format {@link ToleranceProfile#load} reads; "calibration" carries the figures. */
        public String profileJson() {
            var m = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);
            ObjectNode root = m.createObjectNode();
            root.put("description", "decodiff calibrate: the " + noisyDtype + " noise floor of " + reference + " (" + referenceDtype
                    + ") vs " + noisy + " (" + noisyDtype + "); tolerance = " + fmtFactor(factor)
                    + " × the worst rel L2 per point kind" + (perLayer ? " and per layer point" : "")
                    + ", rounded up to 2 digits, never below the fp32 default; near_tie = 2 × the largest |Δ logit|");
            root.put("default", fallback);
            root.put("near_tie", nearTie);
            var pts = root.putObject("points");
            for (var e : kinds) pts.put(e.key(), e.tolerance());
            for (var e : points) pts.put(e.key(), e.tolerance());
            var cal = root.putObject("calibration");
            cal.put("reference", reference);
            cal.put("noisy", noisy);
            cal.put("factor", factor);
            cal.put("steps", steps);
            cal.put("cells", cells);
            cal.put("max_abs_logit_diff", maxAbsLogitDiff);
            var k = cal.putObject("kinds");
            for (var e : kinds) {
                var o = k.putObject(e.key());
                o.put("cells", e.cells());
                o.put("median_rel_l2", e.median());
                o.put("max_rel_l2", e.max());
                o.put("worst", "step " + e.worst().step() + " " + e.worst().point());
                o.put("tolerance", e.tolerance());
            }
            try {
                return m.writeValueAsString(root);
            } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
                throw new IllegalStateException(e);
            }
        }
    }

    private Calibration() {}

    /**
     * Compares the two references (same checkpoint and tokens, or bad input) and derives the profile. The first is
     * the one candidates are judged against, usually float32; the second is the noisy twin, usually bfloat16.
     */
    public static Result run(Path reference, Path noisy, double factor, boolean perLayer, IntConsumer progress) {
        if (!(factor >= 1) || !Double.isFinite(factor)) throw new BadInputException("--factor must be a number ≥ 1, got " + factor);
        var ref = DumpReader.open(reference);
        var twin = DumpReader.open(noisy);
        var mismatches = Comparison.checkIdentity(ref.manifest(), ref.manifestFile(), twin.manifest(), twin.manifestFile(), true);
        if (!mismatches.isEmpty())
            throw new BadInputException(mismatches.getFirst().replace(" (compared anyway: --allow-mismatch)", "")
                    + "; calibration needs two references of one checkpoint fed the same tokens, differing only in precision");
        ComparisonResult r = Comparison.run(ref, Comparison.dumpSource(twin),
                new Comparison.Options(ToleranceProfile.defaults(), false, progress == null ? s -> { } : progress), List.of());
        var notes = new ArrayList<>(r.notes());
        if (!r.onlyInReference().isEmpty()) notes.add(r.onlyInReference().size() + " point(s) only in " + reference + " are not calibrated (they keep the default)");
        for (var c : r.cells()) {
            if (c.nonFinite() > 0)
                throw new BadInputException(noisy, "holds " + c.nonFinite() + " NaN/Inf values in step " + c.step() + " " + c.point()
                        + "; a reference must be finite — re-create it");
            if (c.shapeNote() != null)
                throw new BadInputException(noisy, "step " + c.step() + " " + c.point() + ": " + c.shapeNote()
                        + "; two references of one model read the same positions — re-create them with the same producer");
        }
        var byKind = new LinkedHashMap<String, List<CellStats>>();
        var byPoint = new LinkedHashMap<String, List<CellStats>>();
        r.cells().stream().sorted(Comparator.comparingLong(c -> CapturePoints.causalRank(c.layer() < 0 ? c.point() : CapturePoints.layer(0, c.kind()))))
                .forEach(c -> byKind.computeIfAbsent(c.kind(), k -> new ArrayList<>()).add(c));
        for (var c : r.cells()) byPoint.computeIfAbsent(c.point(), k -> new ArrayList<>()).add(c);
        var kinds = new ArrayList<Entry>();
        for (var e : byKind.entrySet()) kinds.add(entry(e.getKey(), e.getValue(), factor));
        var points = new ArrayList<Entry>();
        if (perLayer) {
            Comparison.causalOrder(byPoint.keySet()).stream().filter(p -> CapturePoints.layerOf(p) >= 0)
                    .forEach(p -> points.add(entry(p, byPoint.get(p), factor)));
        }
        double maxLogit = r.cells().stream().filter(c -> c.point().equals(CapturePoints.LOGITS)).mapToDouble(CellStats::maxAbsDiff).max().orElse(Double.NaN);
        double nearTie = Double.isFinite(maxLogit) ? Math.max(ToleranceProfile.DEFAULT_NEAR_TIE, roundUp(2 * maxLogit)) : ToleranceProfile.DEFAULT_NEAR_TIE;
        if (!Double.isFinite(maxLogit)) notes.add("no logits in both references: near_tie keeps its default " + ToleranceProfile.DEFAULT_NEAR_TIE);
        double fallback = kinds.stream().mapToDouble(Entry::tolerance).max().orElse(ToleranceProfile.DEFAULT_TOLERANCE);
        var rm = r.referenceManifest();
        String refDtype = rm.producer() == null || rm.producer().dtype() == null ? "dtype not given" : rm.producer().dtype();
        var nm = twin.manifest();
        String noisyDtype = nm.producer() == null || nm.producer().dtype() == null ? "dtype not given" : nm.producer().dtype();
        if (refDtype.equals(noisyDtype))
            notes.add("both references say dtype " + refDtype + ": the profile measures their other differences, not a precision's noise floor");
        return new Result(reference.toString(), noisy.toString(), refDtype, noisyDtype, factor, perLayer, r.stepsCompared(),
                r.cells().size(), List.copyOf(kinds), List.copyOf(points), maxLogit, nearTie, fallback, List.copyOf(notes));
    }

    private static Entry entry(String key, List<CellStats> cells, double factor) {
        double[] rel = cells.stream().mapToDouble(CellStats::relL2).sorted().toArray();
        CellStats worst = cells.stream().max(Comparator.comparingDouble(CellStats::relL2)).orElseThrow();
        double median = rel.length % 2 == 1 ? rel[rel.length / 2] : (rel[rel.length / 2 - 1] + rel[rel.length / 2]) / 2;
        double floor = ToleranceProfile.DEFAULT_KINDS.getOrDefault(CapturePoints.kindOf(key), ToleranceProfile.DEFAULT_TOLERANCE);
        double tol = Math.max(floor, roundUp(factor * worst.relL2()));
        return new Entry(key, cells.size(), median, worst.relL2(), worst, floor, tol);
    }

    /** Rounds up to two significant digits (2.83e-2 → 2.9e-2), so a tolerance never drops below factor × max. */
    static double roundUp(double x) {
        if (!(x > 0) || !Double.isFinite(x)) return x;
        return new BigDecimal(x).round(new MathContext(2, RoundingMode.UP)).doubleValue();
    }

    static String fmtFactor(double f) { return f == Math.rint(f) ? String.valueOf((long) f) : String.valueOf(f); }
}
