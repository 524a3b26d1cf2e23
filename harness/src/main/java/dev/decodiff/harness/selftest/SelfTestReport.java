package dev.decodiff.harness.selftest;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.decodiff.engine.Fault;
import dev.decodiff.harness.report.Fmt;
import dev.decodiff.harness.report.Terminal;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/** The self-test's accuracy table (fault × checkpoint), its selfcheck table, the misses in full, and JSON. */
public final class SelfTestReport {
    private static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

    private SelfTestReport() {}

    /** ✓ / ✗ / n-a for one fault (null = clean) on one checkpoint, over its cases. */
    static String mark(SelfTestResult r, Fault f, String ckpt) {
        var os = r.outcomes().stream().filter(o -> o.fault() == f && o.checkpoint().equals(ckpt) && (o.clean() || o.applicable())).toList();
        if (os.isEmpty()) return "n-a";
        long ok = os.stream().filter(SelfTestResult.Outcome::ok).count();
        return (ok == os.size() ? "✓" : "✗") + " " + ok + "/" + os.size();
    }

    /** ✓ / ✗ / n-a for naming one fault's variant on one checkpoint, with the smallest margin over its cases. */
    static String namingMark(SelfTestResult r, Fault f, String ckpt) {
        var os = r.namingRuns().stream().filter(o -> o.fault() == f && o.checkpoint().equals(ckpt)).toList();
        if (os.isEmpty()) return "n-a";
        long named = os.stream().filter(SelfTestResult.Outcome::named).count();
        double margin = os.stream().mapToDouble(o -> o.naming().margin()).min().orElse(Double.NaN);
        return (named == os.size() ? "✓" : "✗") + " " + named + "/" + os.size() + " " + margin(margin);
    }

    /** 5.6e3× — how many tolerances the first cell is off; ∞ for a cell of another shape. */
    static String margin(double m) { return Fmt.rel(m) + "×"; }

    /** "layers.0.attn.out  attention — the scores scaled by 1/√d (d = 32)". */
    static String marginRow(dev.decodiff.harness.arch.gemma4.bisect.VariantMargins.Margin m) {
        return Fmt.pad(m.point(), 22) + m.op() + " — " + m.variant();
    }

    static List<Fault> namingFaults(SelfTestResult r) {
        return List.of(Fault.values()).stream().filter(f -> r.namingRuns().stream().anyMatch(o -> o.fault() == f)).toList();
    }

    static String expectedText(Fault f) {
        return f == null ? "compare matches, selfcheck passes" : f.expectation();
    }

    public static String terminal(SelfTestResult r, boolean colour) {
        var st = new Terminal.Style(colour);
        var sb = new StringBuilder();
        sb.append(st.bold("decodiff selftest")).append('\n');
        sb.append("  every catalog fault × bundled checkpoint × fp32 reference case where it applies: compare's first divergence and\n"
                + "  bisect's culprit must be the cell fixed from the math (docs/faults.md); clean runs must raise no alarm\n\n");
        int fw = 30, cw = Math.max(12, r.checkpoints().stream().mapToInt(String::length).max().orElse(12) + 2);
        sb.append("  ").append(Fmt.pad("fault", fw));
        for (String c : r.checkpoints()) sb.append(Fmt.pad(c, cw));
        sb.append("expected cell\n");
        var rows = new ArrayList<Fault>(List.of(Fault.values()));
        rows.add(null);
        for (Fault f : rows) {
            sb.append("  ").append(Fmt.pad(f == null ? "(clean)" : f.id(), fw));
            for (String c : r.checkpoints()) {
                String m = mark(r, f, c);
                String padded = Fmt.pad(m, cw);
                sb.append(m.startsWith("✓") ? st.green(padded) : m.startsWith("✗") ? st.boldRed(padded) : st.dim(padded));
            }
            sb.append(st.dim(expectedText(f))).append('\n');
        }
        sb.append(st.dim("  (k/n: cases localized of those where the fault applies; short and long per checkpoint)")).append("\n\n");

        sb.append(st.bold("selfcheck, no reference")).append(st.dim("  (alarm = some reference-free check fails; * = must alarm)")).append('\n');
        sb.append("  ").append(Fmt.pad("fault", fw));
        for (String c : r.checkpoints()) sb.append(Fmt.pad(c, cw));
        sb.append('\n');
        for (Fault f : rows) {
            sb.append("  ").append(Fmt.pad(f == null ? "(clean)" : f.id() + (SelfTest.SELFCHECK_REQUIRED.contains(f) ? " *" : ""), fw));
            for (String c : r.checkpoints()) {
                var o = r.selfChecks().stream().filter(s -> s.fault() == f && s.checkpoint().equals(c)).findFirst().orElse(null);
                String m = o == null || !o.applicable() ? "n-a" : o.alarm() ? "alarm" : "quiet";
                String padded = Fmt.pad(m, cw);
                sb.append(o == null || !o.applicable() ? st.dim(padded) : o.ok() ? (o.alarm() ? st.green(padded) : padded) : st.boldRed(padded));
            }
            sb.append('\n');
        }
        sb.append('\n');

        sb.append(st.bold("explanation: the variant bisect names")).append(st.dim("  (named = localized AND the expected op variant named;"
                + " × = rel L2 at the first divergent cell over its tolerance, smallest over the cases)")).append('\n');
        int vw = Math.max(cw, 18);
        sb.append("  ").append(Fmt.pad("fault", fw));
        for (String c : r.checkpoints()) sb.append(Fmt.pad(c, vw));
        sb.append("expected variant\n");
        for (Fault f : namingFaults(r)) {
            sb.append("  ").append(Fmt.pad(f.id(), fw));
            for (String c : r.checkpoints()) {
                String m = namingMark(r, f, c);
                String padded = Fmt.pad(m, vw);
                sb.append(m.startsWith("✓") ? st.green(padded) : m.startsWith("✗") ? st.boldRed(padded) : st.dim(padded));
            }
            var any = r.namingRuns().stream().filter(o -> o.fault() == f).findFirst().orElseThrow();
            sb.append(st.dim(any.naming().expected().describe())).append('\n');
        }
        sb.append("  named ").append(r.named()).append(" of ").append(r.namingRuns().size()).append(", false names ").append(r.falseNames()).append("\n\n");

        sb.append(st.bold("margins of the enumerated variants")).append(st.dim("  (rel L2 over tolerance at layer 0, step 0, each variant"
                + " recomputed from the reference's inputs; ! = under 2×, a bug this small is seen with little or no room)")).append('\n');
        var rowsByName = new java.util.LinkedHashMap<String, java.util.Map<String, Double>>();
        for (var m : r.margins())
            rowsByName.computeIfAbsent(marginRow(m.margin()), k -> new java.util.HashMap<>()).put(m.checkpoint(), m.margin().margin());
        for (var e : rowsByName.entrySet()) {
            double min = e.getValue().values().stream().mapToDouble(Double::doubleValue).min().orElse(Double.NaN);
            sb.append("  ").append(min < 2 ? st.boldRed("! ") : "  ");
            for (String c : r.checkpoints()) {
                Double m = e.getValue().get(c);
                sb.append(Fmt.padLeft(m == null ? "n-a" : margin(m), 10));
            }
            sb.append("  ").append(e.getKey()).append('\n');
        }
        sb.append('\n');

        for (var o : r.outcomes()) {
            if (o.falseName())
                sb.append(st.red(Fmt.wrap("✗ false name on " + (o.clean() ? "clean" : o.fault().id()) + " " + o.checkpoint() + "/" + o.caseName() + ": "
                        + dev.decodiff.harness.report.VerdictText.variant(o.naming().found()), 110, "  ").stripLeading())).append('\n');
            else if (!o.clean() && o.naming() != null && o.naming().expected() != null && o.ok() && !o.named())
                sb.append(st.red(Fmt.wrap("✗ not named: " + o.fault().id() + " on " + o.checkpoint() + "/" + o.caseName() + ": " + o.detail(), 110, "  ").stripLeading())).append('\n');
        }

        CatalogReport.terminal(r, st, sb);

        var misses = r.misses();
        var falseAlarms = r.outcomes().stream().filter(o -> o.clean() && !o.ok()).toList();
        for (var o : misses)
            sb.append(st.red(Fmt.wrap("✗ " + o.fault().id() + " on " + o.checkpoint() + "/" + o.caseName() + ": compare → " + o.compareGot()
                    + ", bisect → " + o.bisectGot() + "; " + o.detail(), 110, "  ").stripLeading())).append('\n');
        for (var o : falseAlarms)
            sb.append(st.red("✗ false alarm on " + o.checkpoint() + "/" + o.caseName() + ": " + o.detail())).append('\n');
        for (var s : r.selfChecks()) {
            if (s.fault() == null && s.alarm()) sb.append(st.red("✗ selfcheck false alarm on " + s.checkpoint() + ": " + s.firstFailure())).append('\n');
            else if (s.fault() != null && !s.ok())
                sb.append(st.red("✗ selfcheck missed " + s.fault().id() + " on " + s.checkpoint())).append('\n');
        }
        if (!misses.isEmpty() || !falseAlarms.isEmpty()) sb.append('\n');
        String summary = r.localized() + " localized of " + r.applicable() + ", false alarms " + r.falseAlarms()
                + ", named " + r.named() + " of " + r.namingRuns().size() + ", false names " + r.falseNames()
                + CatalogReport.summary(r)
                + (r.selfCheckMisses().isEmpty() ? "" : ", selfcheck misses " + r.selfCheckMisses().size())
                + String.format(Locale.ROOT, "  (%.1fs)", r.seconds());
        sb.append(r.passed() ? st.boldGreen("PASS  ") : st.boldRed("FAIL  ")).append(summary).append('\n');
        return sb.toString();
    }

    public static String json(SelfTestResult r) {
        var o = JSON.createObjectNode();
        o.put("verdict", r.passed() ? "pass" : "fail");
        o.put("localized", r.localized());
        o.put("applicable", r.applicable());
        o.put("false_alarms", r.falseAlarms());
        o.put("clean_runs", r.cleanRuns());
        o.put("selfcheck_misses", r.selfCheckMisses().size());
        var ck = o.putArray("checkpoints");
        r.checkpoints().forEach(ck::add);
        var table = o.putObject("table");
        var rows = new ArrayList<Fault>(List.of(Fault.values()));
        rows.add(null);
        for (Fault f : rows) {
            var row = table.putObject(f == null ? "clean" : f.id());
            for (String c : r.checkpoints()) row.put(c, mark(r, f, c));
        }
        var naming = o.putObject("naming");
        naming.put("named", r.named());
        naming.put("applicable", r.namingRuns().size());
        naming.put("false_names", r.falseNames());
        var ntable = naming.putObject("table");
        for (Fault f : namingFaults(r)) {
            var row = ntable.putObject(f.id());
            for (String c : r.checkpoints()) row.put(c, namingMark(r, f, c));
        }
        var vm = o.putArray("variant_margins");
        for (var m : r.margins()) {
            var e = vm.addObject();
            e.put("checkpoint", m.checkpoint());
            e.put("point", m.margin().point());
            e.put("op", m.margin().op());
            e.put("variant", m.margin().variant());
            e.put("rel_l2", m.margin().relL2());
            e.put("tolerance", m.margin().tolerance());
            e.put("margin", m.margin().margin());
        }
        var runs = o.putArray("runs");
        for (var x : r.outcomes()) {
            var e = runs.addObject();
            e.put("fault", x.fault() == null ? "clean" : x.fault().id());
            e.put("checkpoint", x.checkpoint());
            e.put("case", x.caseName());
            e.set("expected", expected(x.expected(), x.clean()));
            if (x.compareGot() == null) e.putNull("compare");
            else e.put("compare", x.compareGot());
            if (x.bisectGot() == null) e.putNull("bisect");
            else e.put("bisect", x.bisectGot());
            e.put("status", !x.applicable() && !x.clean() ? "n-a" : x.ok() ? (x.clean() ? "clean" : "localized") : (x.clean() ? "false_alarm" : "missed"));
            e.put("detail", x.detail());
            if (x.naming() != null) {
                var n = x.naming();
                if (n.expected() == null) e.putNull("variant_expected");
                else e.put("variant_expected", n.expected().describe());
                dev.decodiff.harness.report.JsonReport.variant(e, n.found());
                e.put("named", x.named());
                if (Double.isFinite(n.margin())) e.put("margin", n.margin());
                else e.put("margin", Double.isNaN(n.margin()) ? "NaN" : "inf");
            }
            e.put("seconds", x.seconds());
        }
        var sc = o.putArray("selfcheck");
        for (var s : r.selfChecks()) {
            var e = sc.addObject();
            e.put("fault", s.fault() == null ? "clean" : s.fault().id());
            e.put("checkpoint", s.checkpoint());
            e.put("status", !s.applicable() ? "n-a" : s.alarm() ? "alarm" : "quiet");
            e.put("required", s.required());
            e.put("ok", s.ok());
            if (s.firstFailure() == null) e.putNull("first_failure");
            else e.put("first_failure", s.firstFailure());
        }
        CatalogReport.json(r, o);
        o.put("seconds", r.seconds());
        try {
            return JSON.writeValueAsString(o);
        } catch (com.fasterxml.jackson.core.JsonProcessingException ex) {
            throw new IllegalStateException(ex);
        }
    }

    static ObjectNode expected(ExpectedCell expected, boolean clean) {
        var e = JSON.createObjectNode();
        if (clean) {
            e.put("kind", "no_alarm");
            return e;
        }
        switch (expected) {
            case ExpectedCell.Cell c -> {
                e.put("kind", "cell");
                e.put("step", c.step());
                if (c.layer() == null) e.putNull("layer");
                else e.put("layer", c.layer());
                e.put("point", c.point());
                e.put("why", c.why());
            }
            case ExpectedCell.EngineThrows t -> {
                e.put("kind", "engine_throws");
                e.put("step", t.step());
                e.put("why", t.why());
            }
            case ExpectedCell.NoNumericDivergence n -> {
                e.put("kind", "no_numeric_divergence");
                e.put("selfcheck", n.check());
                e.put("why", n.why());
            }
            case ExpectedCell.SelfCheckCell s -> {
                e.put("kind", "selfcheck_cell");
                e.put("selfcheck", s.check());
                e.put("position", s.position());
                e.put("point", s.point());
                e.put("why", s.why());
            }
            case ExpectedCell.NotApplicable n -> {
                e.put("kind", "not_applicable");
                e.put("why", n.why());
            }
        }
        return e;
    }
}
