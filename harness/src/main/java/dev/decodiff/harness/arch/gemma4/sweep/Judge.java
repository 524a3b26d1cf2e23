package dev.decodiff.harness.arch.gemma4.sweep;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.harness.compare.CellStats;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;

/**
 * Judges a scenario by its invariants: every schedule's row at a (sequence, position, point) equals the first
 * schedule's there to the engine's noise, and no step broke a KV-integrity rule. A refusal stops the judgement: by
 * design when the scenario leaves what the cache can honour, otherwise a plain refusal (conservative, not wrong).
 */
public final class Judge {
    private Judge() {}

    /** The verdict, a failure localized to its first cell ({@link ScenarioEngine#localize}). */
    public static Outcome judge(ScenarioEngine engine, Scenario scenario) {
        var o = verdict(engine, scenario);
        return o instanceof Outcome.Fail f && !f.kind().startsWith("kv rule") && !f.kind().equals("engine threw") ? engine.localize(scenario, f) : o;
    }

    /** Pass, fail, refused or n/a, with a failure's cell as the engine's runs give it (not localized on demand). */
    static Outcome verdict(ScenarioEngine engine, Scenario scenario) {
        var runs = new ArrayList<ScheduleRun>();
        for (var schedule : scenario.schedules()) {
            var run = engine.run(scenario, schedule);
            if (run.unsupported() != null) return new Outcome.NotApplicable(run.unsupported());
            runs.add(run);
        }
        var o = judge(runs, scenario, engine.tolerance(scenario.settings()), engine.logitsDecide());
        // rows that disagree may be the engine's own rounding between two kernels: the engine may show that they are
        return o instanceof Outcome.Fail f && !f.kind().startsWith("kv rule") && !f.kind().equals("engine threw") ? engine.precision(scenario, f) : o;
    }

    private record Key(int seq, int position, String point) {}

    /**
     * The cells of a schedule to compare: all of them over exact caches; over a rounding (quantized) cache only each
     * cell's last computation, since a row computed inside a multi-token step attends its step's rows unrounded while a
     * row recomputed later reads them back rounded, and the families built for such caches line up the last ones.
     */
    private static List<ScheduleRun.Cell> comparable(ScheduleRun run, boolean exact) {
        if (exact) return run.cells();
        var last = new java.util.LinkedHashMap<Key, ScheduleRun.Cell>();
        for (var c : run.cells()) last.put(new Key(c.seq(), c.position(), c.point()), c);
        return List.copyOf(last.values());
    }

    static Outcome judge(List<ScheduleRun> runs, Scenario scenario, double tolerance) { return judge(runs, scenario, tolerance, false); }

    /**
     * @param logitsDecide the tolerance is known for the logits only (an engine whose rounding differs between its
     *                     kernels: a small intermediate such as attn.out carries a relative error no bound is known
     *                     for): a scenario fails on the logits, and the other rows localize — the first cell is the
     *                     first one over the tolerance, in causal order, among the rows whose logits disagree
     */
    static Outcome judge(List<ScheduleRun> runs, Scenario scenario, double tolerance, boolean logitsDecide) {
        // A KV rule broken comes first: it is where the cache went wrong, before any row computed from it.
        ScheduleRun.Violation firstViolation = null;
        int violationSchedule = -1;
        for (int s = 0; s < runs.size() && firstViolation == null; s++) {
            var vs = runs.get(s).violations();
            if (vs.isEmpty()) continue;
            firstViolation = vs.stream().min(Comparator.comparingInt(ScheduleRun.Violation::step)
                    .thenComparingLong(v -> CapturePoints.causalRank(v.point())).thenComparingInt(ScheduleRun.Violation::position)).orElseThrow();
            violationSchedule = s;
        }
        var ref = new HashMap<Key, float[]>();
        for (var c : runs.getFirst().cells()) ref.put(new Key(c.seq(), c.position(), c.point()), c.data());
        record Bad(int schedule, ScheduleRun.Cell cell, double rel, float[] reference) {}
        var bad = new ArrayList<Bad>();
        int cells = 0;
        double worst = 0;
        for (int s = 1; s < runs.size(); s++) {
            for (var c : comparable(runs.get(s), scenario.settings().exactKv())) {
                float[] r = ref.get(new Key(c.seq(), c.position(), c.point()));
                if (r == null) continue;
                cells++;
                double rel = r.length == c.data().length ? CellStats.relL2(c.data(), r) : Double.POSITIVE_INFINITY;
                if (Double.isNaN(rel)) rel = Double.POSITIVE_INFINITY;
                if (!logitsDecide || c.point().equals(CapturePoints.LOGITS)) worst = Math.max(worst, rel);
                if (!(rel <= tolerance)) bad.add(new Bad(s, c, rel, r));
            }
        }
        if (logitsDecide) {
            record Row(int schedule, int seq, int position) {}
            var failing = new java.util.HashSet<Row>();
            for (var b : bad) if (b.cell().point().equals(CapturePoints.LOGITS)) failing.add(new Row(b.schedule(), b.cell().seq(), b.cell().position()));
            bad.removeIf(b -> !failing.contains(new Row(b.schedule(), b.cell().seq(), b.cell().position())));
        }
        if (firstViolation != null) {
            var v = firstViolation;
            int total = runs.stream().mapToInt(r -> r.violations().size()).sum();
            return new Outcome.Fail(violationSchedule, v.step(), v.seq(), v.position(), v.point(), v.relL2(), 0, "kv rule: " + v.rule(),
                    "schedule " + (char) ('A' + violationSchedule) + ", step " + v.step() + ": " + v.detail() + (total > 1 ? " (" + total + " KV-rule violations in all)" : ""), bad.size(), cells, null, null);
        }
        for (int s = 0; s < runs.size(); s++) {
            var t = runs.get(s).thrown();
            if (t != null)
                return new Outcome.Fail(s, t.step(), -1, -1, "(engine)", Double.POSITIVE_INFINITY, 0, "engine threw",
                        "schedule " + (char) ('A' + s) + " threw at " + t.op() + ": " + t.message(), bad.size(), cells, null, null);
        }
        for (int s = 0; s < runs.size(); s++) {
            var refusal = runs.get(s).refusal();
            if (refusal != null) {
                // Rows computed before the refusal still had to agree (a wrong row there is a finding of its own) where
                // the cache is exact; over a rounding cache those rows were lined up for after the refused operation.
                if (!bad.isEmpty() && scenario.settings().exactKv()) break;
                return new Outcome.Refused(refusal.op(), refusal.message(), scenario.undefinedWhy() != null);
            }
        }
        if (bad.isEmpty()) return new Outcome.Pass(cells, worst);
        var first = bad.stream().min(Comparator.<Bad>comparingInt(b -> b.schedule())
                .thenComparingInt(b -> b.cell().step())
                .thenComparingLong(b -> CapturePoints.causalRank(b.cell().point()))
                .thenComparingInt(b -> b.cell().position())).orElseThrow();
        var c = first.cell();
        String kind = scenario.undefinedWhy() != null ? "silent wrong answer" : "schedules disagree";
        String detail = String.format("%d of %d shared cells disagree; first at %s of schedule %c (rel L2 %.3g against %.1e)%s",
                bad.size(), cells, "step " + c.step() + ", sequence " + c.seq() + ", position " + c.position() + ", " + c.point(),
                (char) ('A' + first.schedule()), first.rel(), tolerance,
                scenario.undefinedWhy() != null ? "; the engine accepted an operation it cannot honour: " + scenario.undefinedWhy() : "");
        return new Outcome.Fail(first.schedule(), c.step(), c.seq(), c.position(), c.point(), first.rel(), tolerance, kind, detail,
                bad.size(), cells, first.reference(), c.data());
    }
}
