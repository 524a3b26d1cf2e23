package dev.decodiff.harness.report;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.compare.CellStats;
import dev.decodiff.harness.compare.ComparisonResult;
import dev.decodiff.harness.compare.TokenAgreement;

import java.util.List;

/** kv-drift's measurement as Markdown: per KV-cache type the worst rel L2 per layer, then the logits' drift per step. */
public final class KvDriftReport {
    private KvDriftReport() {}

    /** One KV-cache type: its label, its cache bytes per position, and its comparison against the reference. */
    public record Row(String label, long bytesPerPosition, ComparisonResult result) {}

    /** The tables for one reference; the first row (the exact f32 cache) is left out of the per-step table. */
    public static String markdown(String reference, String model, int steps, int layers, List<Row> rows) {
        var sb = new StringBuilder();
        sb.append(Fmt.format("### %s (%s, %d steps)%n%n", reference, model, steps));
        var head = new StringBuilder("| KV cache | bytes/token | tokens agree | worst logits rel L2 |");
        var rule = new StringBuilder("|---|---:|---:|---:|");
        for (int l = 0; l < layers; l++) { head.append(" L").append(l).append(" out |"); rule.append("---:|"); }
        sb.append(head).append('\n').append(rule).append('\n');
        for (var row : rows) {
            var res = row.result();
            var line = new StringBuilder("| " + row.label() + " | " + row.bytesPerPosition() + " | "
                    + res.tokensWith(TokenAgreement.Status.AGREE) + "/" + res.tokens().size() + " | "
                    + fmt(worst(res, CapturePoints.LOGITS, -1)) + " |");
            for (int l = 0; l < layers; l++) line.append(" ").append(fmt(worst(res, CapturePoints.OUT, l))).append(" |");
            sb.append(line).append('\n');
        }
        sb.append("\nLogits rel L2 per step:\n\n");
        var h2 = new StringBuilder("| step |");
        var r2 = new StringBuilder("|---:|");
        for (int i = 1; i < rows.size(); i++) { h2.append(" ").append(rows.get(i).label()).append(" |"); r2.append("---:|"); }
        sb.append(h2).append('\n').append(r2).append('\n');
        for (int s = 0; s < steps; s++) {
            var line = new StringBuilder("| " + s + " |");
            for (int i = 1; i < rows.size(); i++) line.append(" ").append(fmt(cell(rows.get(i).result(), s, CapturePoints.LOGITS))).append(" |");
            sb.append(line).append('\n');
        }
        sb.append('\n');
        return sb.toString();
    }

    private static double worst(ComparisonResult r, String kind, int layer) {
        double w = 0;
        for (CellStats c : r.cells())
            if (c.kind().equals(kind) && c.layer() == layer) w = Math.max(w, Double.isNaN(c.relL2()) ? Double.POSITIVE_INFINITY : c.relL2());
        return w;
    }

    private static double cell(ComparisonResult r, int step, String point) {
        for (CellStats c : r.cellsOfStep(step)) if (c.point().equals(point)) return c.relL2();
        throw new BadInputException("the reference has no " + point + " at step " + step);
    }

    private static String fmt(double v) { return v == 0 ? "0" : Fmt.format("%.1e", v); }
}
