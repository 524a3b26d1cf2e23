package dev.decodiff.harness.bisect;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.Probe;
import dev.decodiff.engine.arch.LoadedModel;
import dev.decodiff.harness.compare.CandidateSource;
import dev.decodiff.harness.compare.EngineThrewException;
import dev.decodiff.harness.dump.CapturedTensor;
import dev.decodiff.harness.dump.DumpManifest;
import dev.decodiff.harness.live.EngineSetup;
import dev.decodiff.harness.live.LiveStep;

import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * decodiff's engine replayed teacher-forced on a reference's tokens with a set of catalog faults planted, remembered
 * per fault set: the variants bisect names a culprit by. {@code keepAll} keeps every point of every step of each run
 * (the self-test asks many cells of one small case, and compares each fault's run as its candidate: {@link #source});
 * otherwise a run goes only as far as the step asked and keeps only the point asked (one bisect on a real model asks
 * one cell).
 */
public final class CatalogReplays {
    private final LoadedModel model;
    private final DumpManifest tokens;
    private final boolean keepAll;
    private final Map<List<String>, Run> runs = new HashMap<>();

    /** What one run recorded, step → point → tensor; {@code failure} the exception of the step it threw at, if any. */
    private record Run(Map<Integer, Map<String, CapturedTensor>> steps, EngineThrewException failure) {
        CapturedTensor at(int step, String point) { return steps.getOrDefault(step, Map.of()).get(point); }
    }

    public CatalogReplays(LoadedModel model, DumpManifest tokens, boolean keepAll) {
        this.model = model;
        this.tokens = tokens;
        this.keepAll = keepAll;
    }

    public boolean keepsAll() { return keepAll; }

    /** The tensor at (step, point) of the engine with these faults, or null where it recorded none (or threw first). */
    public synchronized float[] at(List<String> faults, int step, String point) {
        var key = List.copyOf(faults);
        var run = runs.get(key);
        CapturedTensor got = run == null ? null : run.at(step, point);
        if (got == null && (run == null || !keepAll)) {
            var fresh = replay(key, keepAll ? tokens.stepCount() - 1 : step, keepAll ? null : step, keepAll ? null : point);
            if (run != null) fresh.steps().forEach((s, m) -> run.steps().computeIfAbsent(s, x -> new HashMap<>()).putAll(m));
            else runs.put(key, fresh);
            got = runs.get(key).at(step, point);
        }
        return got == null ? null : got.data();
    }

    /** The whole run with these faults as compare's candidate (only with {@code keepAll}): what a live run would give. */
    public synchronized CandidateSource source(List<String> faults) {
        if (!keepAll) throw new IllegalStateException("a candidate source needs every point of every step kept");
        var key = List.copyOf(faults);
        var run = runs.computeIfAbsent(key, k -> replay(k, tokens.stepCount() - 1, null, null));
        return new CandidateSource() {
            @Override
            public String describe() {
                return "live engine: " + model.directory() + " (" + model.architecture().name() + ", teacher-forced"
                        + (key.isEmpty() ? "" : ", faults " + String.join(",", key)) + ")";
            }

            @Override public int stepCount() { return tokens.stepCount(); }

            @Override public DumpManifest.Producer producer() { return EngineSetup.producer(key, null); }

            @Override public String observerEffect() { return "not_checked"; }

            @Override
            public LiveStep step(int s) {
                if (run.failure() != null && run.failure().failure().step() == s) throw run.failure();
                var captured = new LinkedHashMap<String, CapturedTensor>(run.steps().getOrDefault(s, Map.of()));
                var st = tokens.step(s);
                var logits = captured.get(CapturePoints.LOGITS);
                int greedy = logits == null ? -1 : argmax(logits.data());
                double margin = logits == null ? Double.NaN : LiveStep.top2Margin(logits.data());
                return new LiveStep(s, st.start(), st.length(), captured, greedy, margin, "live engine, step " + s);
            }
        };
    }

    private Run replay(List<String> faults, int last, Integer onlyStep, String onlyPoint) {
        var out = new HashMap<Integer, Map<String, CapturedTensor>>();
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
                out.computeIfAbsent(current[0], s -> new LinkedHashMap<>()).put(point, CapturedTensor.of(point, shape, data));
                return null;
            }
        };
        var session = model.newSession(probe, faults);
        int s = 0;
        try {
            for (; s <= last; s++) session.forward(tokens.stepTokens(s));
        } catch (RuntimeException e) {
            // a variant that makes the engine throw reproduces nothing past that point: what it recorded stays
            out.remove(s);
            return new Run(out, new EngineThrewException(s, e));
        }
        return new Run(out, null);
    }

    private static int argmax(float[] v) {
        int best = 0;
        for (int j = 1; j < v.length; j++) if (v[j] > v[best]) best = j;
        return best;
    }
}
