package dev.decodiff.harness.arch.gemma4.sweep;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A cache scenario: token streams per sequence, two or more schedules of {@link Op}s over them, and the engine
 * options they run with. The first schedule is the plain one; every other must give the same captures wherever it
 * reaches the same (sequence, position). {@code undefinedWhy}, when set, says why a schedule leaves what the cache can
 * honour (a sliding ring cut back past its window): the engine may refuse it, and a silent wrong answer is the finding.
 *
 * @param family   the family it belongs to ("prefill-vs-decode", "truncate-continue", …)
 * @param boundary the length it was built at, with why that length matters
 */
public record Scenario(String name, String family, Boundary boundary, Map<Integer, int[]> streams, List<List<Op>> schedules,
                       Settings settings, String undefinedWhy) {
    public Scenario {
        streams = Map.copyOf(streams);
        schedules = schedules.stream().map(List::copyOf).toList();
        if (schedules.size() < 2) throw new IllegalArgumentException("a scenario compares at least two schedules, got " + schedules.size());
        settings = settings == null ? Settings.DEFAULT : settings;
    }

    /** How the engine runs the scenario: KV-cache storage types and llama.cpp's context options (ignored by decodiff's engine). */
    public record Settings(String typeK, String typeV, boolean flashAttention, boolean swaFull, int nBatch, int nUbatch, int nCtx) {
        public static final Settings DEFAULT = new Settings("f32", "f32", false, true, 0, 0, 0);

        /** Whether K and V are stored exactly (f32): only then do different chunkings owe the same bits up to summation order. */
        public boolean exactKv() { return typeK.equals("f32") && typeV.equals("f32"); }

        public String describe() {
            var s = new StringBuilder("K/V " + typeK + "/" + typeV);
            if (flashAttention) s.append(", flash attention");
            s.append(swaFull ? ", swa_full" : ", sliding cache of the window only");
            if (nBatch > 0) s.append(", n_batch ").append(nBatch);
            if (nUbatch > 0) s.append(", n_ubatch ").append(nUbatch);
            return s.toString();
        }

        public Settings withKv(String k, String v) { return new Settings(k, v, flashAttention, swaFull, nBatch, nUbatch, nCtx); }
    }

    public int[] stream(int seq) {
        var s = streams.get(seq);
        if (s == null) throw new BadScheduleException("scenario '" + name + "' has no token stream for sequence " + seq);
        return s;
    }

    public Scenario withSchedules(List<List<Op>> s) { return new Scenario(name, family, boundary, streams, s, settings, undefinedWhy); }

    public Scenario withUndefined(String why) { return new Scenario(name, family, boundary, streams, schedules, settings, why); }

    public Scenario withName(String n) { return new Scenario(n, family, boundary, streams, schedules, settings, undefinedWhy); }

    /** Operations over all schedules: what the minimizer shrinks. */
    public int size() { return schedules.stream().mapToInt(List::size).sum(); }

    /** Tokens the longest position reached needs per sequence, for the streams a shrunk scenario keeps. */
    public Scenario trimStreams() {
        var need = new LinkedHashMap<Integer, Integer>();
        for (var sched : schedules) {
            var len = new LinkedHashMap<Integer, Integer>();
            for (var op : sched) {
                switch (op) {
                    case Op.Feed f -> len.merge(f.seq(), f.n(), Integer::sum);
                    case Op.Batch b -> b.feeds().forEach(f -> len.merge(f.seq(), f.n(), Integer::sum));
                    case Op.Truncate t -> len.put(t.seq(), t.length());
                    case Op.Copy c -> len.put(c.to(), c.length());
                    default -> {}
                }
                len.forEach((k, v) -> need.merge(k, v, Math::max));
            }
        }
        var out = new LinkedHashMap<Integer, int[]>();
        streams.forEach((k, v) -> out.put(k, Arrays.copyOf(v, Math.min(v.length, need.getOrDefault(k, 0)))));
        return new Scenario(name, family, boundary, out, schedules, settings, undefinedWhy);
    }

    public String describeSchedules() {
        var lines = new ArrayList<String>();
        for (int i = 0; i < schedules.size(); i++)
            lines.add((char) ('A' + i) + ": " + String.join(", ", schedules.get(i).stream().map(Op::describe).toList()));
        return String.join("\n", lines);
    }
}
