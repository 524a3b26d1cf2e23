package dev.decodiff.harness.arch.gemma4.sweep;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;

/**
 * Sweeps every scenario family across the boundaries, in each KV setting: per family the outcome at each boundary
 * (stopping at its first failure, which is then minimized), so the report says which family first fails and where.
 */
public final class Sweep {
    private final ScenarioEngine engine;

    public Sweep(ScenarioEngine engine) { this.engine = engine; }

    public record AtBoundary(Boundary boundary, Outcome outcome) {}

    /** A family in one setting: its outcomes by boundary; the first failure minimized, if any. */
    public record FamilyResult(String family, String description, Scenario.Settings settings, List<AtBoundary> outcomes,
                               Scenario failing, Minimizer.Minimized minimized, double seconds) {
        public Outcome.Fail firstFailure() {
            return outcomes.stream().map(AtBoundary::outcome).filter(o -> o instanceof Outcome.Fail).map(o -> (Outcome.Fail) o).findFirst().orElse(null);
        }

        public Boundary failingBoundary() {
            return outcomes.stream().filter(a -> a.outcome() instanceof Outcome.Fail).map(AtBoundary::boundary).findFirst().orElse(null);
        }

        /** pass, fail, refused-as-designed, refused, n/a: the family's verdict over its boundaries. */
        public String verdict() {
            if (firstFailure() != null) return "fail";
            if (outcomes.stream().allMatch(a -> a.outcome() instanceof Outcome.NotApplicable)) return "n/a";
            if (outcomes.stream().anyMatch(a -> a.outcome() instanceof Outcome.Refused r && !r.byDesign())) return "pass, refused";
            if (outcomes.stream().anyMatch(a -> a.outcome() instanceof Outcome.Refused)) return "pass, refused-as-designed";
            return "pass";
        }
    }

    public record Result(String engine, List<Boundary> boundaries, List<String> layerEdges, List<FamilyResult> families, double seconds) {
        public boolean passed() { return families.stream().noneMatch(f -> f.firstFailure() != null); }

        /** The failing family whose first failure comes at the smallest boundary. */
        public FamilyResult firstFailing() {
            return families.stream().filter(f -> f.firstFailure() != null)
                    .min(java.util.Comparator.comparingInt(f -> f.failingBoundary().length())).orElse(null);
        }
    }

    /** A progress listener: (done, total, what). */
    public interface Progress {
        void step(int done, int total, String what);
    }

    public Result run(List<Scenario.Settings> settings, List<Boundary> boundaries, List<String> onlyFamilies, boolean minimize, Progress progress) {
        long t0 = System.nanoTime();
        var families = Families.all(engine.config()).stream()
                .filter(f -> onlyFamilies == null || onlyFamilies.isEmpty() || onlyFamilies.contains(f.name())).toList();
        int total = settings.size() * families.size() * boundaries.size(), done = 0;
        var out = new ArrayList<FamilyResult>();
        for (var s : settings) {
            // length by length, every family at each: the families' plain schedules at one length are the same runs,
            // which the engine keeps (LlamaCppScenarios) instead of computing them again
            int n = families.size();
            var outcomes = new ArrayList<List<AtBoundary>>();
            var failing = new Scenario[n];
            var fail = new Outcome.Fail[n];
            var seconds = new double[n];
            for (int i = 0; i < n; i++) outcomes.add(new ArrayList<>());
            for (var b : boundaries) {
                for (int i = 0; i < n; i++) {
                    var f = families.get(i);
                    progress.step(done++, total, f.name() + " @ " + b.length() + " (" + s.describe() + ")");
                    if (fail[i] != null) continue;
                    long f0 = System.nanoTime();
                    Outcome o;
                    Scenario sc = null;
                    if (f.exactOnly() && !s.exactKv()) o = new Outcome.NotApplicable("its schedules split rows into different steps, which a rounding K/V cache does not owe the same bits");
                    else if (f.needsBatch() && !engine.batchesSequences()) o = new Outcome.NotApplicable("the engine feeds one sequence per step");
                    else {
                        sc = f.builder().build(f, engine.config(), b, s, engine.keepsWholeHistory(s));
                        try {
                            o = Judge.judge(engine, sc);
                        } catch (BadScheduleException e) {
                            o = new Outcome.NotApplicable("does not fit the engine at this length: " + e.getMessage());
                        }
                    }
                    outcomes.get(i).add(new AtBoundary(b, o));
                    if (o instanceof Outcome.Fail ff) {
                        failing[i] = sc;
                        fail[i] = ff;
                    }
                    seconds[i] += (System.nanoTime() - f0) / 1e9;
                }
            }
            for (int i = 0; i < n; i++)
                out.add(new FamilyResult(families.get(i).name(), families.get(i).description(), s, outcomes.get(i), failing[i], null, seconds[i]));
        }
        // the first failure (smallest boundary) is the one minimized and written as a repro: one bookkeeping bug
        // usually breaks many families in many settings, and shrinking each would cost more than the sweep
        var first = new Result(engine.describe(), boundaries, List.of(), out, 0).firstFailing();
        if (first != null && minimize) {
            var f = families.stream().filter(x -> x.name().equals(first.family())).findFirst().orElseThrow();
            progress.step(total, total, "minimizing " + f.name());
            long f0 = System.nanoTime();
            var min = new Minimizer(engine).minimize(f, first.failing(), first.firstFailure());
            out.set(out.indexOf(first), new FamilyResult(first.family(), first.description(), first.settings(), first.outcomes(), first.failing(), min,
                    first.seconds() + (System.nanoTime() - f0) / 1e9));
        }
        progress.step(total, total, "done");
        return new Result(engine.describe(), boundaries, Boundaries.layerEdges(engine.config()), out, (System.nanoTime() - t0) / 1e9);
    }

    /** Judges one scenario (from a file) and, if it fails, returns it with its first cell. */
    public Outcome one(Scenario s) { return Judge.judge(engine, s); }

    static Consumer<String> quiet() { return x -> {}; }
}
