package dev.decodiff.harness.selftest;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.decodiff.harness.arch.ArchitectureSupport;
import dev.decodiff.harness.arch.ArchitectureSupports;
import dev.decodiff.harness.arch.CatalogExpectations;
import dev.decodiff.harness.report.Fmt;
import dev.decodiff.harness.report.Terminal;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * The self-test's report of the catalogs run through the plug-in seam ({@link CatalogSelfTest}): per family a table
 * (fault × checkpoint), a clause of the summary line and an object of the JSON under the family's key, each counted
 * over that family's runs only, so that adding a family leaves every other family's figures as they were.
 */
final class CatalogReport {
    private CatalogReport() {}

    /** One family's runs, the checkpoints they ran on, and its catalog's rules and fault order. */
    record Family(String name, List<String> faults, CatalogExpectations rules, List<String> checkpoints,
                  List<SelfTestResult.CatalogOutcome> runs) {
        long applicable() { return runs.stream().filter(o -> !o.clean() && o.applicable()).count(); }

        long localized() { return runs.stream().filter(o -> !o.clean() && o.applicable() && o.localized()).count(); }

        long namingRuns() { return runs.stream().filter(o -> !o.clean() && o.namingRun()).count(); }

        long named() { return runs.stream().filter(o -> !o.clean() && o.namingRun() && o.ok()).count(); }

        long falseAlarms() { return runs.stream().filter(o -> o.clean() && !o.ok()).count(); }

        /** ✓ / ✗ / n-a for one fault (null = clean) on one checkpoint, over its cases: localized and named. */
        String mark(String fault, String ckpt) {
            var os = runs.stream().filter(o -> Objects.equals(o.fault(), fault) && o.checkpoint().equals(ckpt)).toList();
            if (os.isEmpty()) return "n-a";
            long ok = os.stream().filter(SelfTestResult.CatalogOutcome::ok).count();
            long shown = os.stream().filter(o -> o.clean() || o.applicable()).count();
            return (ok == os.size() ? "✓" : "✗") + " " + ok + "/" + os.size() + (shown < os.size() ? " (" + (os.size() - shown) + " match)" : "");
        }

        /** "Qwen3.5 250 localized of 250, named 238 of 238, false alarms 0". */
        String summary() {
            return name + " " + localized() + " localized of " + applicable() + ", named " + named() + " of " + namingRuns()
                    + ", false alarms " + falseAlarms();
        }
    }

    /** The families whose catalog ran, in the plug-ins' order. */
    static List<Family> families(SelfTestResult r) {
        var out = new ArrayList<Family>();
        for (var support : ArchitectureSupports.offering(ArchitectureSupport::catalogExpectations)) {
            var arch = support.architecture();
            var runs = r.catalog().stream().filter(o -> o.architecture().equals(arch.name())).toList();
            if (runs.isEmpty()) continue;
            var checkpoints = r.catalogCheckpoints().stream().filter(c -> runs.stream().anyMatch(o -> o.checkpoint().equals(c))).toList();
            out.add(new Family(arch.name(), arch.faultNames(), support.catalogExpectations().orElseThrow(), checkpoints, runs));
        }
        return out;
    }

    /** The summary line's clauses, "; Qwen3.5 …; Llama family …", or nothing where no catalog ran. */
    static String summary(SelfTestResult r) {
        var sb = new StringBuilder();
        for (var f : families(r)) sb.append("; ").append(f.summary());
        return sb.toString();
    }

    static void terminal(SelfTestResult r, Terminal.Style st, StringBuilder sb) {
        for (var family : families(r)) {
            sb.append(st.bold(family.name() + "'s catalog")).append(st.dim("  (k/n cases where compare's first divergence is the expected cell and bisect names"
                    + " the fault by replay; (m match): cases that cannot show it, where compare must match)")).append('\n');
            int cw = Math.max(20, family.checkpoints().stream().mapToInt(String::length).max().orElse(20) + 2);
            sb.append("  ").append(Fmt.pad("fault", 36));
            for (String c : family.checkpoints()) sb.append(Fmt.pad(c, cw));
            sb.append("expected cell\n");
            var rows = new ArrayList<String>(family.faults());
            rows.add(null);
            for (String id : rows) {
                sb.append("  ").append(Fmt.pad(id == null ? "(clean)" : id, 36));
                for (String c : family.checkpoints()) {
                    String m = family.mark(id, c);
                    String padded = Fmt.pad(m, cw);
                    sb.append(m.startsWith("✓") ? st.green(padded) : m.startsWith("✗") ? st.boldRed(padded) : st.dim(padded));
                }
                sb.append(st.dim(id == null ? "compare matches, bisect names nothing" : family.rules().rule(id))).append('\n');
            }
            for (var o : family.runs()) {
                if (o.ok()) continue;
                sb.append(st.red(Fmt.wrap("✗ " + (o.clean() ? "false alarm" : o.fault()) + " on " + o.checkpoint() + "/" + o.caseName() + ": compare → "
                        + o.compareGot() + ", named " + (o.namedFault() == null ? "nothing" : o.namedFault()) + "; " + o.detail(), 110, "  ").stripLeading())).append('\n');
            }
            sb.append('\n');
        }
    }

    /** One object per family, under its catalog's key ("qwen35"): its counts, its checkpoints and every run. */
    static void json(SelfTestResult r, ObjectNode o) {
        for (var family : families(r)) {
            var q = o.putObject(family.rules().key());
            q.put("localized", family.localized());
            q.put("applicable", family.applicable());
            q.put("named", family.named());
            q.put("naming_runs", family.namingRuns());
            q.put("false_alarms", family.falseAlarms());
            var ck = q.putArray("checkpoints");
            family.checkpoints().forEach(ck::add);
            var runs = q.putArray("runs");
            for (var x : family.runs()) {
                var e = runs.addObject();
                e.put("fault", x.fault() == null ? "clean" : x.fault());
                e.put("checkpoint", x.checkpoint());
                e.put("case", x.caseName());
                e.set("expected", SelfTestReport.expected(x.expected(), x.clean()));
                e.put("compare", x.compareGot());
                if (x.namedFault() == null) e.putNull("named");
                else e.put("named", x.namedFault());
                if (x.proved() == null) e.putNull("proved");
                else e.put("proved", x.proved());
                e.put("status", x.clean() ? (x.ok() ? "clean" : "false_alarm") : !x.applicable() ? (x.ok() ? "n-a" : "missed")
                        : x.ok() ? "localized" : "missed");
                e.put("detail", x.detail());
                e.put("seconds", x.seconds());
            }
        }
    }
}
