package dev.decodiff.harness.arch.gemma4.sweep;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.decodiff.harness.report.Fmt;

import java.util.List;
import java.util.stream.Collectors;

/** The sweep's report: a table of families × settings with pass / fail / refused-as-designed, then each failure minimized and localized. */
public final class SweepReport {
    private SweepReport() {}

    public static String terminal(Sweep.Result r, String model) {
        var s = new StringBuilder("decodiff sweep\n");
        s.append("  engine      ").append(r.engine()).append('\n');
        s.append("  model       ").append(model).append('\n');
        s.append("  boundaries  ").append(r.boundaries().stream().map(Boundary::toString).collect(Collectors.joining(", "))).append('\n');
        s.append("  layer edges ").append(String.join(", ", r.layerEdges())).append('\n');
        int scenarios = r.families().stream().mapToInt(f -> f.outcomes().size()).sum();
        s.append(Fmt.format("  %d scenarios over %d families, %.1fs%n%n", scenarios, r.families().size(), r.seconds()));
        s.append(String.format("%-28s %-44s %-26s %-14s %s%n", "family", "settings", "verdict", "boundary", "first cell"));
        for (var f : r.families()) {
            var fail = f.firstFailure();
            s.append(String.format("%-28s %-44s %-26s %-14s %s%n", f.family(), f.settings().describe(), f.verdict() + counts(f),
                    fail == null ? "" : f.failingBoundary().toString(), fail == null ? "" : fail.cell()));
        }
        // disagreements the engine's own arithmetic accounts for, shown by a re-run: passes, with their reason
        for (var f : r.families())
            for (var a : f.outcomes())
                if (a.outcome() instanceof Outcome.Pass p && p.precision() != null)
                    s.append("\nprecision ").append(f.family()).append(" (").append(f.settings().describe()).append(") at ").append(a.boundary())
                            .append(": ").append(p.precision()).append('\n');
        for (var f : r.families()) {
            var fail = f.firstFailure();
            if (fail == null) continue;
            s.append("\nFAIL ").append(f.family()).append(" (").append(f.settings().describe()).append(") at ").append(f.failingBoundary())
                    .append(": ").append(f.failingBoundary().why()).append('\n');
            s.append("  ").append(fail.kind()).append(": ").append(fail.detail()).append('\n');
            if (f.minimized() != null) {
                var m = f.minimized();
                s.append(Fmt.format("  minimized in %d trials to %d operations, boundary %s:%n", m.trials(), m.scenario().size(), m.scenario().boundary()));
                m.scenario().describeSchedules().lines().forEach(l -> s.append("    ").append(l).append('\n'));
                s.append("  first cell: ").append(m.outcome().cell()).append(" — ").append(m.outcome().kind()).append(": ").append(m.outcome().detail()).append('\n');
            }
        }
        s.append('\n').append(r.passed() ? "PASS: every family passes at every boundary (refusals are listed where the engine refused)\n"
                : "FAIL: " + r.families().stream().filter(f -> f.firstFailure() != null).count() + " families fail; first: "
                + r.firstFailing().family() + " at " + r.firstFailing().failingBoundary() + "\n");
        return s.toString();
    }

    private static String counts(Sweep.FamilyResult f) {
        long pass = f.outcomes().stream().filter(a -> a.outcome() instanceof Outcome.Pass).count();
        long refused = f.outcomes().stream().filter(a -> a.outcome() instanceof Outcome.Refused).count();
        if (f.verdict().equals("n/a")) return "";
        return " (" + pass + "✓" + (refused > 0 ? " " + refused + "⊘" : "") + ")";
    }

    public static String json(Sweep.Result r, String model) {
        var m = new ObjectMapper();
        var root = m.createObjectNode();
        root.put("engine", r.engine());
        root.put("model", model);
        root.put("passed", r.passed());
        root.put("seconds", r.seconds());
        var bs = root.putArray("boundaries");
        for (var b : r.boundaries()) bs.addObject().put("length", b.length()).put("label", b.label()).put("why", b.why());
        var ff = r.firstFailing();
        if (ff != null) {
            var o = root.putObject("first_failing");
            o.put("family", ff.family()).put("settings", ff.settings().describe()).put("boundary", ff.failingBoundary().length())
                    .put("label", ff.failingBoundary().label()).put("seconds", ff.seconds());
        }
        var edges = root.putArray("layer_edges");
        r.layerEdges().forEach(edges::add);
        var fams = root.putArray("families");
        for (var f : r.families()) {
            var o = fams.addObject();
            o.put("family", f.family());
            o.put("description", f.description());
            o.put("settings", f.settings().describe());
            o.put("verdict", f.verdict());
            o.put("seconds", f.seconds());
            var per = o.putArray("boundaries");
            for (var a : f.outcomes()) {
                var p = per.addObject().put("length", a.boundary().length()).put("label", a.boundary().label()).put("outcome", a.outcome().word());
                outcome(p, a.outcome());
            }
            if (f.minimized() != null) {
                var mm = o.putObject("minimized");
                mm.put("operations", f.minimized().scenario().size());
                mm.put("trials", f.minimized().trials());
                mm.set("scenario", ScenarioJson.write(f.minimized().scenario()));
                outcome(mm.putObject("first_cell"), f.minimized().outcome());
            }
        }
        try {
            return m.writerWithDefaultPrettyPrinter().writeValueAsString(root);
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    private static void outcome(ObjectNode p, Outcome o) {
        switch (o) {
            case Outcome.Pass pass -> {
                p.put("cells", pass.cells()).put("worst_rel_l2", pass.worstRelL2());
                if (pass.precision() != null) p.put("precision", pass.precision());
            }
            case Outcome.Fail f -> p.put("schedule", f.schedule()).put("step", f.step()).put("sequence", f.seq()).put("position", f.position())
                    .put("point", f.point()).put("rel_l2", Double.isFinite(f.relL2()) ? f.relL2() : -1).put("kind", f.kind()).put("detail", f.detail());
            case Outcome.Refused ref -> p.put("op", ref.op()).put("message", ref.message()).put("by_design", ref.byDesign());
            case Outcome.NotApplicable na -> p.put("why", na.why());
        }
    }

    /** A self-contained HTML page: every family in every setting with its verdict, then the minimized first failure. */
    public static String html(Sweep.Result r, String model) {
        var s = new StringBuilder("<!doctype html><html><head><meta charset=\"utf-8\"><title>decodiff sweep</title><style>"
                + "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}"
                + ".fail{background:#fdd}.pass{background:#dfd}.refused-as-designed,.refused{background:#ffd}pre{background:#f4f4f4;padding:8px}"
                + "</style></head><body><h1>decodiff sweep</h1>");
        s.append("<p>Engine: ").append(esc(r.engine())).append("<br>Model: ").append(esc(model)).append("<br>Boundaries: ")
                .append(esc(r.boundaries().stream().map(Boundary::toString).collect(Collectors.joining(", "))))
                .append(Fmt.format("<br>%d families, %.1fs</p>", r.families().size(), r.seconds()));
        s.append("<p><b>").append(r.passed() ? "PASS: every family passes at every boundary" : "FAIL: first " + esc(r.firstFailing().family())
                + " at " + esc(r.firstFailing().failingBoundary().toString())).append("</b></p>");
        s.append("<table><tr><th>family</th><th>settings</th><th>verdict</th><th>boundary</th><th>first cell</th></tr>");
        for (var f : r.families()) {
            var fail = f.firstFailure();
            String word = f.verdict().startsWith("pass, refused-as-designed") ? "refused-as-designed" : f.verdict().startsWith("pass, refused") ? "refused"
                    : f.verdict().equals("fail") ? "fail" : f.verdict().equals("n/a") ? "na" : "pass";
            s.append("<tr class=\"").append(word).append("\"><td>").append(esc(f.family())).append("</td><td>").append(esc(f.settings().describe()))
                    .append("</td><td>").append(esc(f.verdict() + counts(f))).append("</td><td>").append(fail == null ? "" : esc(f.failingBoundary().toString()))
                    .append("</td><td>").append(fail == null ? "" : esc(fail.cell())).append("</td></tr>");
        }
        s.append("</table>");
        var first = r.firstFailing();
        if (first != null && first.minimized() != null) {
            var m = first.minimized();
            s.append("<h2>First failure, minimized</h2><p>").append(esc(first.family())).append(" (").append(esc(first.settings().describe()))
                    .append(Fmt.format(") in %d operations:</p><pre>", m.scenario().size())).append(esc(m.scenario().describeSchedules()))
                    .append("</pre><p>First cell: ").append(esc(m.outcome().cell())).append(" — ").append(esc(m.outcome().detail())).append("</p>");
        }
        return s.append("</body></html>\n").toString();
    }

    private static String esc(String x) { return x.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"); }

    static List<String> lines(String s) { return s.lines().toList(); }
}
