package dev.decodiff.harness.calibrate;

import dev.decodiff.harness.report.Fmt;


/** The terminal summary of `decodiff calibrate`. */
public final class CalibrationReport {
    private CalibrationReport() {}

    public static String terminal(Calibration.Result r, String written) {
        var sb = new StringBuilder();
        sb.append("decodiff calibrate: ").append(r.reference()).append(" (").append(r.referenceDtype()).append(") vs ")
                .append(r.noisy()).append(" (").append(r.noisyDtype()).append(")\n");
        sb.append(r.steps()).append(" steps, ").append(Fmt.count(r.cells())).append(" cells; tolerance = ")
                .append(Calibration.fmtFactor(r.factor())).append(" × the worst rel L2 of each kind, rounded up, never below the fp32 default\n\n");
        int w = 11;
        for (var e : r.kinds()) w = Math.max(w, e.key().length());
        sb.append(Fmt.pad("point kind", w)).append("  cells  median rel L2  max rel L2  worst cell                   tolerance  fp32 default\n");
        for (var e : r.kinds()) {
            sb.append(Fmt.pad(e.key(), w)).append(Fmt.padLeft(String.valueOf(e.cells()), 7))
                    .append(Fmt.padLeft(Fmt.rel(e.median()), 15)).append(Fmt.padLeft(Fmt.rel(e.max()), 12)).append("  ")
                    .append(Fmt.pad("step " + e.worst().step() + " " + e.worst().point(), 27))
                    .append(Fmt.padLeft(Fmt.rel(e.tolerance()), 11)).append(Fmt.padLeft(Fmt.rel(e.floor()), 14)).append('\n');
        }
        if (!r.points().isEmpty()) sb.append("\nper layer point: ").append(r.points().size()).append(" tolerances (").append(Calibration.fmtFactor(r.factor()))
                .append(" × each point's worst over the steps); they override the kinds above\n");
        sb.append('\n');
        if (Double.isFinite(r.maxAbsLogitDiff()))
            sb.append(Fmt.format("near_tie  %s logits (2 × the largest |Δ logit|, %.3g)%n", Fmt.num(r.nearTie(), 3), r.maxAbsLogitDiff()));
        sb.append("default   ").append(Fmt.rel(r.fallback())).append(" (points of other kinds: the loosest kind)\n");
        for (String n : r.notes()) sb.append("note: ").append(n).append('\n');
        if (written != null)
            sb.append("\nwrote ").append(written).append(" — judge a ").append(r.noisyDtype()).append(" candidate with: decodiff compare ")
                    .append(r.reference()).append(" CANDIDATE --tolerance ").append(written).append('\n');
        return sb.toString();
    }
}
