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
        var runs = o.putArray("runs");
        for (var x : r.outcomes()) {
            var e = runs.addObject();
            e.put("fault", x.fault() == null ? "clean" : x.fault().id());
            e.put("checkpoint", x.checkpoint());
            e.put("case", x.caseName());
            e.set("expected", expected(x));
            if (x.compareGot() == null) e.putNull("compare");
            else e.put("compare", x.compareGot());
            if (x.bisectGot() == null) e.putNull("bisect");
            else e.put("bisect", x.bisectGot());
            e.put("status", !x.applicable() && !x.clean() ? "n-a" : x.ok() ? (x.clean() ? "clean" : "localized") : (x.clean() ? "false_alarm" : "missed"));
            e.put("detail", x.detail());
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
        o.put("seconds", r.seconds());
        try {
            return JSON.writeValueAsString(o);
        } catch (com.fasterxml.jackson.core.JsonProcessingException ex) {
            throw new IllegalStateException(ex);
        }
    }

    private static ObjectNode expected(SelfTestResult.Outcome x) {
        var e = JSON.createObjectNode();
        if (x.clean()) {
            e.put("kind", "no_alarm");
            return e;
        }
        switch (x.expected()) {
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
