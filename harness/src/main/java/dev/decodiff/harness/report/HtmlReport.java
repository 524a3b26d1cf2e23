package dev.decodiff.harness.report;

import dev.decodiff.harness.compare.CellStats;
import dev.decodiff.harness.compare.ComparisonResult;
import dev.decodiff.harness.compare.TokenAgreement;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * One self-contained HTML page (no scripts, fonts or images from anywhere): the verdict, a step × layer heatmap of
 * the worst rel L2, per-layer curves (one per step) as inline SVG against the tolerance, the layers × points table
 * of the first divergent step, and the tokens.
 */
public final class HtmlReport {
    private HtmlReport() {}

    public static String render(ComparisonResult r) {
        var g = new StepLayerGrid(r);
        var cols = g.usedColumns();
        var h = new StringBuilder(64 * 1024);
        h.append("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>decodiff: ")
                .append(esc(r.verdict())).append(" — ").append(esc(r.reference())).append("</title>\n<style>\n")
                .append("""
                        body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px 32px;color:#1b1f24;background:#fff}
                        h1{font-size:22px;margin:0 0 4px} h2{font-size:16px;margin:28px 0 8px}
                        .meta{color:#57606a;font-size:13px;line-height:1.5}
                        .verdict{border-radius:8px;padding:14px 18px;margin:16px 0;font-size:15px;line-height:1.5;max-width:1100px}
                        .match{background:#dafbe1;border:1px solid #4ac26b} .divergence{background:#ffebe9;border:1px solid #ff8182} .incomplete{background:#fff8c5;border:1px solid #d4a72c} .precision{background:#ddf4ff;border:1px solid #54aeff} .reference_disagrees{background:#fbefff;border:1px solid #c297ff}
                        .badge{font-weight:700;letter-spacing:.04em;margin-right:8px}
                        table{border-collapse:collapse;font-size:12px;font-variant-numeric:tabular-nums}
                        th{font-weight:600;padding:3px 6px;color:#57606a;text-align:center}
                        td{padding:3px 6px;text-align:right;white-space:nowrap}
                        table.heat td{min-width:44px;text-align:center;border:1px solid #fff;color:#1b1f24}
                        td.fail{font-weight:700;outline:2px solid #cf222e;outline-offset:-2px}
                        td.first{outline:3px solid #000;outline-offset:-3px}
                        .legend span{display:inline-block;width:26px;height:12px;margin-right:2px;vertical-align:middle}
                        .small{font-size:12px;color:#57606a}
                        code{font-size:12px;background:#f6f8fa;padding:1px 4px;border-radius:4px}
                        """)
                .append("</style></head><body>\n");
        var rp = r.referenceManifest().producer();
        var cp = r.candidateProducer();
        h.append("<h1>decodiff compare</h1>\n<div class=\"meta\">reference <code>").append(esc(r.reference())).append("</code>")
                .append(rp == null ? "" : " (" + esc(rp.describe()) + ")")
                .append("<br>candidate <code>").append(esc(r.candidate())).append("</code>")
                .append(cp == null ? "" : " (" + esc(cp.describe()) + ")").append("<br>")
                .append(r.stepsCompared()).append(" of ").append(r.referenceSteps()).append(" steps · ")
                .append(Fmt.count(r.cells().size())).append(" cells · tolerances: ").append(esc(r.profile().source()));
        if (!ComparisonResult.NOT_APPLICABLE.equals(r.observerEffect()))
            h.append(" · observer effect: ").append(esc(r.observerEffect()));
        h.append("</div>\n");
        h.append("<div class=\"verdict ").append(r.verdict()).append("\"><span class=\"badge\">")
                .append(r.verdict().replace('_', ' ').toUpperCase(java.util.Locale.ROOT)).append("</span>").append(esc(VerdictText.paragraph(r))).append("</div>\n");

        var failure = r.engineFailure();
        if (failure != null) {
            h.append("<h2>The engine threw at step ").append(failure.step()).append("</h2>\n<pre class=\"small\">")
                    .append(esc(failure.what()));
            for (String frame : failure.frames()) h.append("\n    at ").append(esc(frame));
            h.append("</pre>\n");
        }
        heatmap(h, r, g, cols);
        curves(h, r, g, cols);
        detail(h, r);
        local(h, r);
        tokens(h, r);
        if (!r.onlyInReference().isEmpty() || !r.onlyInCandidate().isEmpty() || !r.notes().isEmpty() || !r.complete()) {
            h.append("<h2>Not compared</h2>\n<div class=\"small\">");
            for (String m : r.completeness().reasons()) h.append("Missing: ").append(esc(m)).append("<br>");
            if (!r.onlyInReference().isEmpty()) h.append("Only in the reference: ").append(esc(String.join(", ", r.onlyInReference()))).append("<br>");
            if (!r.onlyInCandidate().isEmpty()) h.append("Only in the candidate: ").append(esc(String.join(", ", r.onlyInCandidate()))).append("<br>");
            for (String n : r.notes()) h.append("Note: ").append(esc(n)).append("<br>");
            h.append("</div>\n");
        }
        h.append("<p class=\"small\">Made by decodiff. rel L2 = ‖c − r‖ / ‖r‖; a cell fails above its tolerance or with any NaN/Inf.</p>\n");
        h.append("</body></html>\n");
        return h.toString();
    }

    /** Green (far below tolerance) → yellow (at tolerance) → red (over), on the share of tolerance used, log scale. */
    static String colour(CellStats c) {
        if (c == null) return "#eaeef2";
        double u = c.usage();
        if (c.nonFinite() > 0 || Double.isNaN(u) || c.shapeNote() != null) return "#8250df";
        if (u > 1) {
            double t = Math.min(1, Math.log10(u) / 4);
            return hsl(0, 80, 62 - 22 * t);
        }
        double lg = u <= 0 ? -6 : Math.max(-6, Math.log10(u));
        double t = (lg + 6) / 6;                    // 0 at 1e-6 of tolerance … 1 at the tolerance
        return hsl(140 - 95 * t, 60, 80 - 18 * t);
    }

    private static String hsl(double hue, double s, double l) {
        return Fmt.format("hsl(%.0f,%.0f%%,%.0f%%)", hue, s, l);
    }

    private static void heatmap(StringBuilder h, ComparisonResult r, StepLayerGrid g, List<Integer> cols) {
        var fd = r.firstDivergence();
        h.append("<h2>Worst rel L2 per step × layer</h2>\n<table class=\"heat\"><tr><th>step</th>");
        for (int col : cols) h.append("<th>").append(esc(g.columnName(col))).append("</th>");
        h.append("<th>token</th></tr>\n");
        for (int s = 0; s < g.steps; s++) {
            h.append("<tr><th>").append(s).append("</th>");
            for (int col : cols) {
                var c = g.worst[s][col];
                boolean first = fd != null && fd.step() == s && g.column(fd.point()) == col;
                h.append("<td style=\"background:").append(colour(c)).append("\"");
                var cls = new ArrayList<String>();
                if (c != null && c.failed()) cls.add("fail");
                if (first) cls.add("first");
                if (!cls.isEmpty()) h.append(" class=\"").append(String.join(" ", cls)).append("\"");
                if (c != null) h.append(" title=\"").append(esc(c.point() + ": rel L2 " + Fmt.sci(c.relL2()) + " (tolerance " + Fmt.sci(c.tolerance()) + ")")).append("\"");
                h.append(">").append(c == null ? "" : esc(StepDetail.value(c))).append("</td>");
            }
            var t = s < r.tokens().size() ? r.tokens().get(s) : null;
            h.append("<td>").append(t == null ? "" : esc(tokenText(t))).append("</td></tr>\n");
        }
        h.append("</table>\n<div class=\"small legend\">share of tolerance: ");
        for (double u : new double[]{1e-6, 1e-4, 1e-2, 1, 10, 1e3}) {
            var fake = new CellStats(0, "x", new long[0], u, 1, 1, 1, 1, 0, 0, 0, 1, null);
            h.append("<span style=\"background:").append(colour(fake)).append("\"></span>").append(Fmt.rel(u)).append(" ");
        }
        h.append(" · outlined: over tolerance · black frame: first divergence</div>\n");
    }

    private static String tokenText(TokenAgreement t) {
        return switch (t.status()) {
            case AGREE -> "= " + t.reference();
            case NEAR_TIE -> t.candidate() + " ≠ " + t.reference() + " (near-tie)";
            case FLIP -> t.candidate() + " ≠ " + t.reference() + " (flip)";
            case UNKNOWN -> "?";
        };
    }

    private static void curves(StringBuilder h, ComparisonResult r, StepLayerGrid g, List<Integer> cols) {
        int W = 960, H = 340, L = 64, R = 20, T = 16, B = 40;
        double lo = 1e-9, hi = 1e-9;
        for (int s = 0; s < g.steps; s++)
            for (int col : cols) {
                var c = g.worst[s][col];
                if (c == null) continue;
                double v = c.relL2();
                if (Double.isFinite(v) && v > 0) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
                hi = Math.max(hi, c.tolerance());
            }
        double yMin = Math.floor(Math.log10(Math.max(lo, 1e-12))), yMax = Math.ceil(Math.log10(Math.max(hi, 1e-11)) + 0.01);
        if (yMax - yMin < 2) yMin = yMax - 2;
        final double y0 = yMin, y1 = yMax;
        int n = cols.size();
        java.util.function.IntToDoubleFunction xOf = i -> L + (n <= 1 ? 0 : i * (W - L - R) / (double) (n - 1));
        java.util.function.DoubleUnaryOperator yOf = v -> {
            double lg = !Double.isFinite(v) ? y1 : v <= 0 ? y0 : Math.max(y0, Math.min(y1, Math.log10(v)));
            return T + (y1 - lg) / (y1 - y0) * (H - T - B);
        };
        h.append("<h2>Per-layer curves: worst rel L2 of each layer, one line per step</h2>\n");
        h.append("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"").append(W).append("\" height=\"").append(H)
                .append("\" viewBox=\"0 0 ").append(W).append(' ').append(H).append("\" font-size=\"11\" font-family=\"sans-serif\">\n");
        h.append("<rect x=\"0\" y=\"0\" width=\"").append(W).append("\" height=\"").append(H).append("\" fill=\"#fff\"/>\n");
        for (int e = (int) y0; e <= (int) y1; e++) {
            double y = yOf.applyAsDouble(Math.pow(10, e));
            h.append(Fmt.format("<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#d0d7de\"/>", L, W - R, y, y))
                    .append(Fmt.format("<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" fill=\"#57606a\">1e%d</text>\n", L - 6, y + 4, e));
        }
        for (int i = 0; i < n; i++) {
            if (n > 30 && i % 2 == 1) continue;
            h.append(Fmt.format("<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" fill=\"#57606a\">%s</text>",
                    xOf.applyAsDouble(i), H - B + 16, esc(g.columnName(cols.get(i)))));
        }
        h.append('\n');
        // tolerance of each column's worst cell
        var tol = new StringBuilder();
        for (int i = 0; i < n; i++) {
            var c = g.worstOfColumn(cols.get(i));
            if (c == null) continue;
            tol.append(Fmt.format("%.1f,%.1f ", xOf.applyAsDouble(i), yOf.applyAsDouble(c.tolerance())));
        }
        h.append("<polyline fill=\"none\" stroke=\"#cf222e\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\" points=\"")
                .append(tol.toString().trim()).append("\"><title>tolerance</title></polyline>\n");
        for (int s = 0; s < g.steps; s++) {
            var pts = new StringBuilder();
            for (int i = 0; i < n; i++) {
                var c = g.worst[s][cols.get(i)];
                if (c == null) continue;
                double v = c.nonFinite() > 0 ? Double.POSITIVE_INFINITY : c.relL2();
                pts.append(Fmt.format("%.1f,%.1f ", xOf.applyAsDouble(i), yOf.applyAsDouble(v)));
            }
            double t = g.steps <= 1 ? 0 : s / (double) (g.steps - 1);
            String stroke = hsl(215 - 185 * t, 70, 45);
            h.append("<polyline fill=\"none\" stroke=\"").append(stroke).append("\" stroke-width=\"").append(s == 0 ? "2.2" : "1.3")
                    .append("\" opacity=\"0.85\" points=\"").append(pts.toString().trim()).append("\"><title>step ").append(s).append("</title></polyline>\n");
        }
        h.append(Fmt.format("<text x=\"%d\" y=\"%d\" fill=\"#57606a\">blue: step 0 (prefill) → orange: step %d · dashed red: tolerance</text>\n",
                L, H - 6, Math.max(0, g.steps - 1)));
        h.append("</svg>\n");
    }

    private static void detail(StringBuilder h, ComparisonResult r) {
        var d = StepDetail.of(r);
        h.append("<h2>").append(esc(d.title())).append(" — rel L2 per layer × point</h2>\n<table class=\"heat\"><tr><th>layer</th>");
        for (String k : d.kinds()) h.append("<th>").append(esc(k)).append("</th>");
        h.append("</tr>\n");
        for (var e : d.layers().entrySet()) {
            h.append("<tr><th>").append(e.getKey()).append("</th>");
            for (String k : d.kinds()) cellTd(h, e.getValue().get(k), d);
            h.append("</tr>\n");
        }
        h.append("</table>\n");
        var model = new ArrayList<CellStats>(d.before());
        model.addAll(d.after());
        if (!model.isEmpty()) {
            h.append("<table class=\"heat\" style=\"margin-top:6px\"><tr>");
            for (var c : model) h.append("<th>").append(esc(c.point())).append("</th>");
            h.append("</tr><tr>");
            for (var c : model) cellTd(h, c, d);
            h.append("</tr></table>\n");
        }
    }

    /**
     * Local attribution of the focus step: what each op added on the candidate's own inputs, the status in the cell's
     * tooltip, and the precision effects named over the whole comparison.
     */
    private static void local(StringBuilder h, ComparisonResult r) {
        var a = r.attribution();
        if (a == null) return;
        var d = StepDetail.of(r);
        h.append("<h2>Local error at step ").append(d.step())
                .append(" — what each op added on the candidate's own inputs (~ precision effect, ✗ unexplained, ? not measurable)</h2>\n")
                .append("<table class=\"heat\"><tr><th>layer</th>");
        for (String k : d.kinds()) h.append("<th>").append(esc(k)).append("</th>");
        h.append("</tr>\n");
        for (var e : d.layers().entrySet()) {
            h.append("<tr><th>").append(e.getKey()).append("</th>");
            for (String k : d.kinds()) {
                var c = e.getValue().get(k);
                var l = c == null ? null : a.of(c.step(), c.point());
                if (l == null) {
                    h.append("<td></td>");
                    continue;
                }
                String mark = switch (l.status()) {
                    case EXACT -> "";
                    case PRECISION -> "~";
                    case UNEXPLAINED -> "✗";
                    case UNATTRIBUTED -> "?";
                };
                String cls = l.status() == dev.decodiff.harness.compare.attribution.LocalError.Status.UNEXPLAINED ? " class=\"fail first\"" : "";
                h.append("<td").append(cls).append(" title=\"").append(esc(l.point() + ": " + l.status().name().toLowerCase(java.util.Locale.ROOT)
                        + (l.explanation() == null ? "" : ", " + l.explanation()) + " — recomputed from " + l.from()
                        + (l.granularity() == null ? "" : " (" + l.granularity() + ")"))).append("\">")
                        .append(l.status() == dev.decodiff.harness.compare.attribution.LocalError.Status.UNATTRIBUTED ? "" : esc(Fmt.rel(l.local())))
                        .append(mark).append("</td>");
            }
            h.append("</tr>\n");
        }
        h.append("</table>\n");
        if (a.hasEffects()) {
            h.append("<h2>Precision effects</h2>\n<ul class=\"small\">");
            for (var e : a.effects())
                h.append("<li>").append(esc(e.explanation())).append(": ").append(Fmt.count(e.cells())).append(e.cells() == 1 ? " cell" : " cells")
                        .append(", first ").append(esc(e.first().point())).append(" at step ").append(e.first().step()).append(" (local ")
                        .append(Fmt.sci(e.first().local())).append(", reproduced to ").append(Fmt.sci(e.first().leftover())).append(")</li>");
            h.append("</ul>\n");
        }
    }

    private static void cellTd(StringBuilder h, CellStats c, StepDetail d) {
        h.append("<td style=\"background:").append(colour(c)).append("\"");
        if (c != null) {
            String cls = (c.failed() ? "fail" : "") + (d.isFirst(c) ? " first" : "");
            if (!cls.isBlank()) h.append(" class=\"").append(cls.trim()).append("\"");
            h.append(" title=\"").append(esc(c.point() + ": cosine " + Fmt.num(c.cosine(), 6) + ", norm ratio " + Fmt.num(c.normRatio(), 4)
                    + ", max |Δ| " + Fmt.sci(c.maxAbsDiff()))).append("\"");
        }
        h.append(">").append(c == null ? "" : esc(StepDetail.value(c))).append("</td>");
    }

    private static void tokens(StringBuilder h, ComparisonResult r) {
        if (r.tokens().isEmpty()) return;
        h.append("<h2>Greedy tokens</h2>\n<table><tr><th>step</th><th>reference</th><th>candidate</th><th>reference top-2 margin</th><th></th></tr>\n");
        for (var t : r.tokens()) {
            h.append("<tr><td>").append(t.step()).append("</td><td>").append(t.reference() == null ? "?" : t.reference())
                    .append("</td><td>").append(t.candidate() == null ? "?" : t.candidate()).append("</td><td>")
                    .append(t.referenceMargin() == null ? "" : Fmt.num(t.referenceMargin(), 4)).append("</td><td>")
                    .append(t.status().name().toLowerCase(Locale.ROOT).replace('_', '-')).append("</td></tr>\n");
        }
        h.append("</table>\n");
    }

    static String esc(String s) {
        if (s == null) return "";
        var sb = new StringBuilder(s.length());
        for (char ch : s.toCharArray()) {
            switch (ch) {
                case '<' -> sb.append("&lt;");
                case '>' -> sb.append("&gt;");
                case '&' -> sb.append("&amp;");
                case '"' -> sb.append("&quot;");
                default -> sb.append(ch);
            }
        }
        return sb.toString();
    }
}
