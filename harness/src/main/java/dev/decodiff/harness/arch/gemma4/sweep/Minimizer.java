package dev.decodiff.harness.arch.gemma4.sweep;

import java.util.ArrayList;
import java.util.List;

/**
 * Shrinks a failing scenario while it still fails: first the length it was built at (down from the failing
 * boundary, one position at a time), then whole operations (one at a time from the end, in every schedule), then the
 * size of each multi-token feed. Any schedule of a correct engine gives the same rows, so a shrunk pair that still
 * disagrees is still a finding; one the engine cannot run (a truncation past the sequence) is rejected.
 */
public final class Minimizer {
    private final ScenarioEngine engine;
    int trials;

    public Minimizer(ScenarioEngine engine) { this.engine = engine; }

    public record Minimized(Scenario scenario, Outcome.Fail outcome, int trials) {}

    public Minimized minimize(Families.Family family, Scenario failing, Outcome.Fail outcome) {
        var best = failing;
        var bestOutcome = outcome;
        for (int len = failing.boundary().length() - 1; len >= 1; len--) {
            var b = new Boundary(len, "L=" + len, "shrunk below " + failing.boundary().label());
            Scenario s;
            try {
                s = family.builder().build(family, engine.config(), b, failing.settings(), engine.keepsWholeHistory(failing.settings()));
            } catch (BadScheduleException e) {
                break;
            }
            var o = tryJudge(s);
            if (o == null) break;
            best = s;
            bestOutcome = o;
        }
        boolean changed = true;
        while (changed) {
            changed = false;
            for (int sch = 0; sch < best.schedules().size(); sch++) {
                for (int i = best.schedules().get(sch).size() - 1; i >= 0; i--) {
                    var cand = without(best, sch, i);
                    if (cand == null) continue;
                    var o = tryJudge(cand);
                    if (o != null) { best = cand; bestOutcome = o; changed = true; }
                }
            }
            for (int sch = 0; sch < best.schedules().size(); sch++) {
                for (int i = 0; i < best.schedules().get(sch).size(); i++) {
                    while (best.schedules().get(sch).get(i) instanceof Op.Feed f && f.n() > 1) {
                        var cand = with(best, sch, i, new Op.Feed(f.seq(), f.n() - 1));
                        var o = tryJudge(cand);
                        if (o == null) break;
                        best = cand;
                        bestOutcome = o;
                        changed = true;
                    }
                }
            }
        }
        // trials were judged on what decides them; the smallest failing one is localized
        if (!bestOutcome.kind().startsWith("kv rule") && !bestOutcome.kind().equals("engine threw")) bestOutcome = engine.localize(best, bestOutcome);
        return new Minimized(best.trimStreams().withName(failing.family() + "-minimized"), bestOutcome, trials);
    }

    /** The outcome if the scenario still fails, else null. */
    private Outcome.Fail tryJudge(Scenario s) {
        trials++;
        try {
            return Judge.verdict(engine, s) instanceof Outcome.Fail f ? f : null;
        } catch (BadScheduleException e) {
            return null;
        }
    }

    private static Scenario without(Scenario s, int sch, int i) {
        var list = new ArrayList<List<Op>>(s.schedules());
        var ops = new ArrayList<>(list.get(sch));
        if (ops.size() <= 1) return null;
        ops.remove(i);
        list.set(sch, ops);
        return s.withSchedules(list);
    }

    private static Scenario with(Scenario s, int sch, int i, Op op) {
        var list = new ArrayList<List<Op>>(s.schedules());
        var ops = new ArrayList<>(list.get(sch));
        ops.set(i, op);
        list.set(sch, ops);
        return s.withSchedules(list);
    }
}
