package dev.decodiff.harness.bisect;

import dev.decodiff.engine.Probe;
import dev.decodiff.engine.arch.LoadedModel;
import dev.decodiff.harness.dump.DumpManifest;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * decodiff's engine replayed teacher-forced on a reference's tokens with a set of catalog faults planted, remembered
 * per fault set: the variants bisect names a culprit by. {@code keepAll} keeps every point of every step of each run
 * (the self-test asks many cells of one small case); otherwise a run goes only as far as the step asked and keeps only
 * the point asked (one bisect on a real model asks one cell).
 */
public final class CatalogReplays {
    private final LoadedModel model;
    private final DumpManifest tokens;
    private final boolean keepAll;
    /** fault set → (step → (point → values)); a run that threw is kept as the steps it finished. */
    private final Map<List<String>, Map<Integer, Map<String, float[]>>> runs = new HashMap<>();

    public CatalogReplays(LoadedModel model, DumpManifest tokens, boolean keepAll) {
        this.model = model;
        this.tokens = tokens;
        this.keepAll = keepAll;
    }

    /** The tensor at (step, point) of the engine with these faults, or null where it recorded none (or threw first). */
    public synchronized float[] at(List<String> faults, int step, String point) {
        var key = List.copyOf(faults);
        var run = runs.get(key);
        float[] got = run == null ? null : run.getOrDefault(step, Map.of()).get(point);
        if (got != null || run != null && keepAll) return got;
        run = replay(key, keepAll ? tokens.stepCount() - 1 : step, keepAll ? null : step, keepAll ? null : point);
        runs.merge(key, run, (a, b) -> {
            b.forEach((s, m) -> a.computeIfAbsent(s, x -> new HashMap<>()).putAll(m));
            return a;
        });
        return runs.get(key).getOrDefault(step, Map.of()).get(point);
    }

    private Map<Integer, Map<String, float[]>> replay(List<String> faults, int last, Integer onlyStep, String onlyPoint) {
        var out = new HashMap<Integer, Map<String, float[]>>();
        int[] current = {0};
        Probe probe = new Probe() {
            @Override
            public boolean wants(String point) {
                return onlyPoint == null || current[0] == onlyStep && point.equals(onlyPoint);
            }

            @Override
            public void beginStep(int step, int start, int length) { current[0] = step; }

            @Override
            public float[] capture(String point, int[] shape, float[] data) {
                out.computeIfAbsent(current[0], s -> new HashMap<>()).put(point, data);
                return null;
            }
        };
        var session = model.newSession(probe, faults);
        try {
            for (int s = 0; s <= last; s++) session.forward(tokens.stepTokens(s));
        } catch (RuntimeException e) {
            // a variant that makes the engine throw reproduces nothing past that point: what it recorded stays
        }
        return out;
    }
}
