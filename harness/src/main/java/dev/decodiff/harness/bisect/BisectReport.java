package dev.decodiff.harness.bisect;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.decodiff.engine.CapturePoints;
import dev.decodiff.harness.compare.CellStats;
import dev.decodiff.harness.report.Fmt;
import dev.decodiff.harness.report.JsonReport;
import dev.decodiff.harness.report.Terminal;
import dev.decodiff.harness.report.VerdictText;

import java.util.Locale;

/** bisect's reports: terminal tables, JSON ({@code culprit}, {@code healed_by}, {@code diagnosis} …) and one HTML page. */
public final class BisectReport {
    private static final ObjectMapper JSON = dev.decodiff.harness.Printable.json(new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT));

    private BisectReport() {}

    // ------------------------------------------------------------------ terminal

    /** The report, every character from the inputs escaped where it could steer a terminal ({@link Terminal#safe}). */
    public static String terminal(BisectResult r, boolean colour) { return Terminal.safe(colour, st -> terminal(r, st)); }

    private static String terminal(BisectResult r, Terminal.Style st) {
        var sb = new StringBuilder();
        var cmp = r.compare();
        sb.append(st.bold("decodiff bisect")).append('\n');
        sb.append("  reference  ").append(cmp.reference()).append('\n');
        sb.append("  candidate  ").append(cmp.candidate()).append('\n');
        var fd = r.firstDivergence();
        if (fd == null) {
            sb.append('\n').append(r.diverged() ? st.boldRed("DIVERGENCE") : st.boldGreen("MATCH")).append('\n')
                    .append(Fmt.wrap(r.conclusion(), 100, "  ")).append('\n');
            return sb.toString();
        }
        sb.append("  compare's first divergence: step ").append(fd.step()).append(", ").append(fd.point())
                .append(fd.cell() != null ? ", rel L2 " + Fmt.sci(fd.relL2()) : "").append('\n');
        sb.append(String.format(Locale.ROOT, "  bisected in %.2fs%n%n", r.seconds()));
        if (r.kvRounding() != null) {
            sb.append(st.yellow("KV-CACHE ROUNDING (expected noise of " + r.kvRounding() + ", not a bug)")).append('\n')
                    .append(Fmt.wrap(r.conclusion(), 100, "  ")).append('\n');
            return sb.toString();
        }

        int s = fd.step();
        if (r.catalog() != null) return catalogTerminal(r, st, sb);
        sb.append(st.bold("Local vs accumulated error at step " + s)).append('\n');
        sb.append(st.dim("  accumulated: the engine free-running; local: the layer on the reference's input and cache history")).append('\n');
        sb.append("  ").append(Fmt.pad("layer", 12)).append(Fmt.padLeft("accumulated", 12)).append(Fmt.padLeft("local", 10))
                .append("  ").append(Fmt.pad("first local failure", 24)).append("status\n");
        for (var m : r.modelPoints()) {
            if (CapturePoints.causalRank(m.point()) > 1) continue;
            modelRow(sb, m, st);
        }
        for (var l : r.layers()) {
            String status = l.status().text();
            boolean culprit = l.status() == BisectResult.Status.CULPRIT;
            sb.append("  ").append(Fmt.pad(Integer.toString(l.layer()), 12)).append(cellText(l.accumulated(), 12, st))
                    .append(cellText(l.local(), 10, st)).append("  ")
                    .append(Fmt.pad(l.firstLocalFailure() == null ? "—" : CapturePoints.kindOf(l.firstLocalFailure()), 24))
                    .append(culprit ? st.boldRed("← " + status) : l.status() == BisectResult.Status.ALSO_LOCAL ? st.red(status) : st.dim(status)).append('\n');
        }
        for (var m : r.modelPoints()) {
            if (CapturePoints.causalRank(m.point()) <= 1) continue;
            modelRow(sb, m, st);
        }
        sb.append('\n');

        if (!r.substitutions().isEmpty()) {
            var c = r.culprit();
            String out = CapturePoints.layer(c.layer(), CapturePoints.OUT);
            sb.append(st.bold("Substitution inside layer " + c.layer())).append('\n');
            sb.append(st.dim("  on the reference's input and cache, one tensor replaced by the reference's; judged on " + out)).append('\n');
            sb.append("  ").append(Fmt.pad("replaced", 26)).append(Fmt.pad("scope", 15)).append(Fmt.pad(out + " rel L2", 24)).append("heals\n");
            for (var x : r.substitutions()) {
                sb.append("  ").append(Fmt.pad(x.name(), 26)).append(Fmt.pad(x.scope(), 15));
                if (x.note() != null) {
                    sb.append(st.dim(x.note())).append('\n');
                    continue;
                }
                sb.append(Fmt.pad(Fmt.rel(x.before()) + " → " + Fmt.rel(x.after()), 24))
                        .append(x.healed() ? st.boldGreen("✓ heals") : st.dim("no")).append('\n');
            }
            sb.append('\n');
        }

        if (!r.transplant().isEmpty()) {
            String tp = r.culprit() != null ? r.culprit().point() : fd.point();
            sb.append(st.bold("Cache transplant over steps")).append('\n');
            sb.append(st.dim("  keys and values of steps < t from the reference, the engine's own from t on; " + tp + " at step " + s)).append('\n');
            sb.append("  ").append(Fmt.pad("t", 5)).append(Fmt.pad("cache", 36)).append("rel L2\n");
            for (var t : r.transplant()) {
                String what = t.referenceCacheSteps() == 0 ? "engine's own (free-running)"
                        : "reference's for step" + (t.referenceCacheSteps() == 1 ? " 0" : "s 0–" + (t.referenceCacheSteps() - 1));
                sb.append("  ").append(Fmt.pad(Integer.toString(t.referenceCacheSteps()), 5)).append(Fmt.pad(what, 36))
                        .append(t.healed() ? st.green(Fmt.rel(t.relL2())) : st.red(Fmt.rel(t.relL2()) + " ✗")).append('\n');
            }
            sb.append(Fmt.wrap("→ " + r.cacheVerdict(), 100, "  ")).append("\n\n");
        }
        for (String n : r.notes()) sb.append(st.yellow(Fmt.wrap("note: " + n, 100, "").replace("\n", "\n      "))).append('\n');
        if (r.culprit() != null) {
            var c = r.culprit();
            sb.append(st.boldRed("CULPRIT")).append("  step ").append(c.step())
                    .append(c.layer() != null ? ", layer " + c.layer() : "").append(", ").append(c.point()).append('\n');
            var healed = r.healedBy();
            if (c.layer() != null) sb.append("  healed by: ").append(healed.isEmpty() ? "no substitution" : String.join(", ", healed)).append('\n');
            sb.append(Fmt.wrap("diagnosis: " + r.diagnosis(), 100, "  ")).append('\n');
            if (r.variant() != null) sb.append("  variant: ").append(VerdictText.variant(r.variant())).append('\n');
        } else {
            sb.append(st.boldRed("DIVERGENCE (no local culprit)")).append('\n');
        }
        sb.append('\n').append(Fmt.wrap(r.conclusion(), 100, "  ")).append('\n');
        return sb.toString();
    }

    /** An architecture bisected through its fault catalog: the faults replayed at the culprit cell, then the substitutions. */
    private static String catalogTerminal(BisectResult r, Terminal.Style st, StringBuilder sb) {
        var n = r.catalog();
        sb.append(st.bold("Naming: each catalog fault planted alone, replayed on the reference's tokens")).append('\n');
        sb.append(st.dim("  ‖its " + n.point() + " − the candidate's‖ / ‖the reference's‖ at step " + n.step() + " (faults that leave the cell unchanged are left out)")).append('\n');
        for (var t : n.tried()) {
            boolean isNamed = t.fault().equals(n.named());
            sb.append("  ").append(Fmt.pad(t.fault(), 40)).append(Fmt.padLeft(Fmt.rel(t.relL2()), 10))
                    .append(isNamed ? "  " + st.boldRed("← reproduces the candidate") : "").append('\n');
        }
        sb.append("  ").append(Fmt.pad("(the clean engine)", 40)).append(Fmt.padLeft(Fmt.rel(n.cleanRelL2()), 10)).append("\n\n");
        if (!r.substitutions().isEmpty()) {
            sb.append(st.bold("Substitution: the reference's tensors written into " + n.engine() + " at step " + n.step())).append('\n');
            sb.append(st.dim("  judged where the free-running candidate was wrong: the culprit layer's output, then the step's logits")).append('\n');
            sb.append("  ").append(Fmt.pad("replaced", 43)).append(' ').append(Fmt.pad("judged on", 26)).append(Fmt.pad("rel L2", 22)).append("heals\n");
            for (var x : r.substitutions()) {
                sb.append("  ").append(Fmt.pad(x.name(), 43)).append(' ').append(Fmt.pad(x.scope(), 26));
                if (x.note() != null) {
                    sb.append(st.dim(x.note())).append('\n');
                    continue;
                }
                sb.append(Fmt.pad(Fmt.rel(x.before()) + " → " + Fmt.rel(x.after()), 22))
                        .append(x.healed() ? st.boldGreen("✓ heals") : st.dim("no")).append('\n');
            }
            sb.append('\n');
        }
        for (String note : r.notes()) sb.append(st.yellow(Fmt.wrap("note: " + note, 100, "").replace("\n", "\n      "))).append('\n');
        var c = r.culprit();
        if (c != null) {
            sb.append(st.boldRed("CULPRIT")).append("  step ").append(c.step()).append(c.layer() != null ? ", layer " + c.layer() : "")
                    .append(", ").append(c.point()).append('\n');
            sb.append("  named: ").append(n.named() == null ? "no catalog fault" : n.named()).append('\n');
            sb.append("  proved by substitution: ").append(n.proved() == null ? "nothing downstream to heal" : n.proved() ? "yes" : "no").append('\n');
            if (r.diagnosis() != null) sb.append(Fmt.wrap("diagnosis: " + r.diagnosis(), 100, "  ")).append('\n');
            var v = r.variant();
            if (v != null) sb.append("  variant: ").append(VerdictText.variant(v)).append(", rel L2 ").append(Fmt.rel(v.relL2()))
                    .append("; runner-up ").append(v.runnerUp()).append(", ").append(Fmt.rel(v.runnerUpRelL2()))
                    .append(" (margin ").append(Double.isInfinite(v.margin()) ? "∞: reproduced bit for bit" : Fmt.rel(v.margin()) + "×").append(")\n");
        }
        sb.append('\n').append(Fmt.wrap(r.conclusion(), 100, "  ")).append('\n');
        return sb.toString();
    }

    private static void modelRow(StringBuilder sb, BisectResult.ModelRow m, Terminal.Style st) {
        boolean failed = m.local() != null && m.local().failed();
        sb.append("  ").append(Fmt.pad(m.point(), 12)).append(cellText(m.accumulated(), 12, st)).append(cellText(m.local(), 10, st))
                .append("  ").append(Fmt.pad(failed ? m.point() : "—", 24))
                .append(failed ? st.boldRed("← culprit") : "").append('\n');
    }

    private static String cellText(CellStats c, int w, Terminal.Style st) {
        if (c == null) return Fmt.padLeft("—", w);
        String t = c.shapeNote() != null ? "shape✗" : Fmt.rel(c.relL2()) + (c.failed() ? "✗" : " ");
        String padded = Fmt.padLeft(t, w);
        return c.failed() ? st.red(padded) : padded;
    }

    // ------------------------------------------------------------------ JSON

    public static String json(BisectResult r) {
        try {
            return JSON.writeValueAsString(tree(r));
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
    }

    public static ObjectNode tree(BisectResult r) {
        var o = JSON.createObjectNode();
        o.put("verdict", r.verdict());
        o.put("reference", r.compare().reference());
        o.put("candidate", r.compare().candidate());
        dev.decodiff.harness.report.JsonReport.engineFailure(o, r.compare().engineFailure());
        var fd = r.firstDivergence();
        if (fd == null) o.putNull("first_divergence");
        else {
            var f = o.putObject("first_divergence");
            f.put("step", fd.step());
            if (fd.layer() == null) f.putNull("layer");
            else f.put("layer", fd.layer());
            f.put("point", fd.point());
            num(f, "rel_l2", fd.relL2());
            if (fd.diagnosis() == null) f.putNull("diagnosis");
            else f.put("diagnosis", fd.diagnosis());
        }
        var c = r.culprit();
        if (c == null) o.putNull("culprit");
        else {
            var cu = o.putObject("culprit");
            cu.put("step", c.step());
            if (c.layer() == null) cu.putNull("layer");
            else cu.put("layer", c.layer());
            cu.put("point", c.point());
            num(cu, "local_rel_l2", c.local().relL2());
            num(cu, "tolerance", c.local().tolerance());
            if (c.local().shapeNote() != null) cu.put("shape", c.local().shapeNote());
        }
        var hb = o.putArray("healed_by");
        r.healedBy().forEach(hb::add);
        if (r.diagnosis() == null) o.putNull("diagnosis");
        else o.put("diagnosis", r.diagnosis());
        JsonReport.variant(o, r.variant());
        if (r.cacheVerdict() == null) o.putNull("cache_verdict");
        else o.put("cache_verdict", r.cacheVerdict());
        o.put("conclusion", r.conclusion());
        var layers = o.putArray("layers");
        for (var l : r.layers()) {
            var e = layers.addObject();
            e.put("layer", l.layer());
            rel(e, "accumulated", l.accumulated());
            rel(e, "local", l.local());
            if (l.firstLocalFailure() == null) e.putNull("first_local_failure");
            else e.put("first_local_failure", l.firstLocalFailure());
            e.put("status", l.status().name().toLowerCase(Locale.ROOT));
        }
        var model = o.putArray("model_points");
        for (var m : r.modelPoints()) {
            var e = model.addObject();
            e.put("point", m.point());
            rel(e, "accumulated", m.accumulated());
            rel(e, "local", m.local());
        }
        var subs = o.putArray("substitutions");
        for (var x : r.substitutions()) {
            var e = subs.addObject();
            e.put("replaced", x.name());
            e.put("scope", x.scope());
            num(e, "before", x.before());
            num(e, "after", x.after());
            num(e, "tolerance", x.tolerance());
            e.put("healed", x.healed());
            if (x.note() != null) e.put("note", x.note());
        }
        var tr = o.putArray("transplant");
        for (var t : r.transplant()) {
            var e = tr.addObject();
            e.put("reference_cache_steps", t.referenceCacheSteps());
            num(e, "rel_l2", t.relL2());
            num(e, "tolerance", t.tolerance());
            e.put("healed", t.healed());
        }
        if (r.catalog() != null) {
            var n = r.catalog();
            var cat = o.putObject("catalog_naming");
            cat.put("step", n.step());
            cat.put("point", n.point());
            if (n.named() == null) cat.putNull("named");
            else cat.put("named", n.named());
            num(cat, "clean_rel_l2", n.cleanRelL2());
            var tried = cat.putArray("tried");
            for (var t : n.tried()) {
                var e = tried.addObject();
                e.put("fault", t.fault());
                num(e, "rel_l2", t.relL2());
            }
            if (n.engine() == null) cat.putNull("substituted_into");
            else cat.put("substituted_into", n.engine());
            if (n.proved() == null) cat.putNull("proved");
            else cat.put("proved", n.proved());
        }
        var notes = o.putArray("notes");
        r.notes().forEach(notes::add);
        num(o, "seconds", r.seconds());
        return o;
    }

    private static void rel(ObjectNode o, String k, CellStats c) {
        if (c == null) o.putNull(k);
        else num(o, k, c.relL2());
    }

    private static void num(ObjectNode o, String k, double v) {
        if (Double.isFinite(v)) o.put(k, v);
        else o.putNull(k);
    }

    // ------------------------------------------------------------------ HTML

    public static String html(BisectResult r) {
        var h = new StringBuilder(16 * 1024);
        var fd = r.firstDivergence();
        h.append("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>decodiff bisect: ").append(esc(r.verdict()))
                .append(" — ").append(esc(r.compare().reference())).append("</title>\n<style>\n").append("""
                        body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px 32px;color:#1b1f24;background:#fff}
                        h1{font-size:22px;margin:0 0 4px} h2{font-size:16px;margin:28px 0 8px}
                        .meta{color:#57606a;font-size:13px;line-height:1.5}
                        .verdict{border-radius:8px;padding:14px 18px;margin:16px 0;font-size:15px;line-height:1.5;max-width:1100px}
                        .match{background:#dafbe1;border:1px solid #4ac26b} .culprit,.inconclusive,.engine_threw{background:#ffebe9;border:1px solid #ff8182}
                        .badge{font-weight:700;letter-spacing:.04em;margin-right:8px}
                        table{border-collapse:collapse;font-size:13px;font-variant-numeric:tabular-nums}
                        th{font-weight:600;padding:4px 10px;color:#57606a;text-align:left;border-bottom:1px solid #d0d7de}
                        td{padding:3px 10px;white-space:nowrap} td.num{text-align:right}
                        .fail{color:#cf222e;font-weight:600} .ok{color:#1a7f37} .dim{color:#57606a}
                        tr.culprit td{background:#ffebe9}
                        code{font-size:12px;background:#f6f8fa;padding:1px 4px;border-radius:4px}
                        .small{font-size:12px;color:#57606a}
                        """).append("</style></head><body>\n");
        h.append("<h1>decodiff bisect</h1>\n<div class=\"meta\">reference <code>").append(esc(r.compare().reference()))
                .append("</code><br>candidate <code>").append(esc(r.compare().candidate())).append("</code>");
        if (fd != null) h.append("<br>compare's first divergence: step ").append(fd.step()).append(", <code>").append(esc(fd.point())).append("</code>");
        h.append("</div>\n");
        String badge = switch (r.verdict()) {
            case "match" -> "MATCH";
            case "culprit" -> "CULPRIT";
            case "engine_threw" -> "ENGINE THREW";
            case "kv_cache_rounding" -> "KV-CACHE ROUNDING";
            default -> "DIVERGENCE";
        };
        h.append("<div class=\"verdict ").append(r.verdict()).append("\"><span class=\"badge\">").append(badge).append("</span>");
        var c = r.culprit();
        if (c != null) h.append("step ").append(c.step()).append(c.layer() != null ? ", layer " + c.layer() : "").append(", <code>")
                .append(esc(c.point())).append("</code><br>");
        h.append(esc(r.conclusion())).append("</div>\n");
        if (fd == null) return h.append("</body></html>\n").toString();

        h.append("<h2>Local vs accumulated error at step ").append(fd.step()).append("</h2>\n<p class=\"small\">accumulated: the engine free-running; ")
                .append("local: the layer on the reference's input and cache history. rel L2 of each layer's output.</p>\n");
        h.append("<table><tr><th>layer</th><th>accumulated</th><th>local</th><th>first local failure</th><th>status</th></tr>\n");
        for (var m : r.modelPoints()) if (CapturePoints.causalRank(m.point()) <= 1) modelRowHtml(h, m);
        for (var l : r.layers()) {
            h.append("<tr").append(l.status() == BisectResult.Status.CULPRIT ? " class=\"culprit\"" : "").append("><td>").append(l.layer())
                    .append("</td>").append(cellHtml(l.accumulated())).append(cellHtml(l.local())).append("<td>")
                    .append(l.firstLocalFailure() == null ? "—" : "<code>" + esc(l.firstLocalFailure()) + "</code>").append("</td><td>")
                    .append(esc(l.status().text())).append("</td></tr>\n");
        }
        for (var m : r.modelPoints()) if (CapturePoints.causalRank(m.point()) > 1) modelRowHtml(h, m);
        h.append("</table>\n");

        if (!r.substitutions().isEmpty()) {
            String out = CapturePoints.layer(c.layer(), CapturePoints.OUT);
            h.append("<h2>Substitution inside layer ").append(c.layer()).append("</h2>\n<p class=\"small\">On the reference's input and cache, ")
                    .append("the named tensors replaced by the reference's; judged on <code>").append(esc(out)).append("</code>.</p>\n");
            h.append("<table><tr><th>replaced</th><th>scope</th><th>before</th><th>after</th><th>heals</th></tr>\n");
            for (var x : r.substitutions()) {
                h.append("<tr><td><code>").append(esc(x.name())).append("</code></td><td>").append(esc(x.scope())).append("</td>");
                if (x.note() != null) {
                    h.append("<td colspan=\"3\" class=\"dim\">").append(esc(x.note())).append("</td></tr>\n");
                    continue;
                }
                h.append("<td class=\"num\">").append(Fmt.sci(x.before())).append("</td><td class=\"num\">").append(Fmt.sci(x.after()))
                        .append("</td><td>").append(x.healed() ? "<span class=\"ok\">✓ heals</span>" : "<span class=\"dim\">no</span>").append("</td></tr>\n");
            }
            h.append("</table>\n");
        }
        if (!r.transplant().isEmpty()) {
            h.append("<h2>Cache transplant over steps</h2>\n<p class=\"small\">Keys and values of steps &lt; t from the reference, the engine's own from t on; <code>")
                    .append(esc(c != null ? c.point() : fd.point())).append("</code> at step ").append(fd.step()).append(".</p>\n");
            h.append("<table><tr><th>t</th><th>rel L2</th></tr>\n");
            for (var t : r.transplant())
                h.append("<tr><td>").append(t.referenceCacheSteps()).append("</td><td class=\"num ").append(t.healed() ? "ok" : "fail").append("\">")
                        .append(Fmt.sci(t.relL2())).append("</td></tr>\n");
            h.append("</table>\n<p>").append(esc(r.cacheVerdict())).append("</p>\n");
        }
        if (r.diagnosis() != null) h.append("<h2>Diagnosis</h2>\n<p>").append(esc(r.diagnosis())).append("</p>\n");
        if (r.variant() != null) h.append("<p><b>Variant:</b> ").append(esc(VerdictText.variant(r.variant()))).append("</p>\n");
        for (String n : r.notes()) h.append("<p class=\"small\">Note: ").append(esc(n)).append("</p>\n");
        h.append("<p class=\"small\">Made by decodiff. rel L2 = ‖c − r‖ / ‖r‖.</p>\n</body></html>\n");
        return h.toString();
    }

    private static void modelRowHtml(StringBuilder h, BisectResult.ModelRow m) {
        boolean failed = m.local() != null && m.local().failed();
        h.append("<tr").append(failed ? " class=\"culprit\"" : "").append("><td>").append(esc(m.point())).append("</td>")
                .append(cellHtml(m.accumulated())).append(cellHtml(m.local())).append("<td>").append(failed ? "<code>" + esc(m.point()) + "</code>" : "—")
                .append("</td><td></td></tr>\n");
    }

    private static String cellHtml(CellStats c) {
        if (c == null) return "<td class=\"num dim\">—</td>";
        String t = c.shapeNote() != null ? "shape ✗" : Fmt.sci(c.relL2());
        return "<td class=\"num " + (c.failed() ? "fail" : "") + "\"" + (c.shapeNote() != null ? " title=\"" + esc(c.shapeNote()) + "\"" : "")
                + ">" + esc(t) + "</td>";
    }

    static String esc(String s) {
        return s == null ? "" : s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\"", "&quot;");
    }
}
