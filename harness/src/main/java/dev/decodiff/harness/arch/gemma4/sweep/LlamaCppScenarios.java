package dev.decodiff.harness.arch.gemma4.sweep;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.Gemma4Config;
import dev.decodiff.engine.CheckpointFiles;
import dev.decodiff.harness.selfcheck.LlamaCppSelfCheck;
import dev.decodiff.llamacpp.Gemma4Limits;
import dev.decodiff.llamacpp.LlamaCppRunner;
import dev.decodiff.llamacpp.RowCapture;
import dev.decodiff.llamacpp.ffi.GgufPreflight;
import dev.decodiff.llamacpp.ffi.LlamaContext;
import dev.decodiff.llamacpp.ffi.LlamaLibrary;
import dev.decodiff.llamacpp.ffi.LlamaModel;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;

/**
 * Runs scenarios on llama.cpp through its C API: one context per schedule (a fresh cache) with the scenario's
 * settings — K/V types, flash attention, swa_full, n_batch/n_ubatch — holding up to {@value #SEQUENCES} sequences;
 * feeds and batches through llama_decode with every token an output, truncation through llama_memory_seq_rm, copies
 * through llama_memory_seq_cp (then seq_rm past the prefix), snapshots through llama_state_seq_get/set_data. What it
 * compares is every position's logits. llama.cpp does not refuse a cut of its sliding-window cache; it documents that
 * a caller must check llama_memory_seq_pos_min, so a cut or copy after which pos_min says the next token's window is
 * gone counts as the refusal (llama-server then re-processes the prompt).
 */
public final class LlamaCppScenarios implements ScenarioEngine {
    static final int SEQUENCES = 4;
    /** The ubatch of the setting that splits a batch into graphs smaller than it. */
    static final int SMALL_UBATCH = 4;

    private final Path gguf;
    private final Gemma4Config config;
    private final int threads;
    private final LlamaModel model;
    private final int capacity;
    /**
     * Whether every run captures its steps' per-layer rows through the eval callback; else a scenario is judged on its
     * logits (which decide it) and only a failing one is run again with its rows, to localize its first cell.
     */
    private final boolean captureLayers;

    /** Per-layer rows only when a failing scenario is run again to localize it. */
    public LlamaCppScenarios(Path gguf, Gemma4Config config, int threads) { this(gguf, config, threads, false); }

    public LlamaCppScenarios(Path gguf, Gemma4Config config, int threads, boolean captureLayers) {
        this.captureLayers = captureLayers;
        this.gguf = gguf;
        this.config = config;
        this.threads = threads;
        var lib = LlamaLibrary.get();
        Gemma4Limits.check(gguf, GgufPreflight.check(gguf));
        this.model = LlamaModel.load(lib, gguf, false);
        this.capacity = LlamaContext.Options.lengthFor(1);
    }

    @Override
    public String describe() { return LlamaCppRunner.describeRelease() + " on " + gguf.getFileName(); }

    @Override public Gemma4Config config() { return config; }

    /**
     * llama.cpp's own precision between a batched and a one-token product, which is not a finding: 2^-10 on its exact
     * fp32 path ({@link LlamaCppSelfCheck#TOLERANCE}); 2^-7 where flash attention (P·V accumulated in fp16, in cell
     * order: it grows with the context) or an f16/bf16 cache rounds; 2^-6 for q8_0/q4_0 caches, whose flash-attention
     * path also quantizes Q. On gemma4-tiny the clean sweep's worst cells are 1.0e-3 with flash attention up to 26
     * positions, 4.1e-3 at 253, and 1.2e-2 for a q8_0 cache (a two-sequence batch).
     */
    @Override
    public double tolerance(Scenario.Settings s) {
        if (s.typeK().startsWith("q") || s.typeV().startsWith("q")) return 0x1p-6;
        if (s.flashAttention() || !s.exactKv()) return 0x1p-7;
        return LlamaCppSelfCheck.TOLERANCE;
    }

    @Override public boolean keepsWholeHistory(Scenario.Settings s) { return s.swaFull(); }

    @Override public boolean batchesSequences() { return true; }

    /** The tolerances above are llama.cpp's between two products of a whole logits row; its per-layer rows localize. */
    @Override public boolean logitsDecide() { return true; }

    /** Cells a context holds: boundaries include it. */
    public int capacity() { return capacity; }

    public int ubatch() { return SMALL_UBATCH; }

    @Override
    public String weightsIdentity() { return "GGUF " + gguf.getFileName() + ", sha256 " + CheckpointFiles.sha256(gguf); }

    public Path gguf() { return gguf; }

    /**
     * The precision configurations of a clean sweep: exact; flash attention; a sliding cache of the window only with
     * ubatches smaller than the batch; bf16, f16 and q8_0 caches; a quantized V cache (flash attention, window only, small ubatches).
     */
    public List<Scenario.Settings> defaultSettings() {
        return List.of(
                new Scenario.Settings("f32", "f32", false, true, 0, 0, 0),
                new Scenario.Settings("f32", "f32", true, true, 0, 0, 0),
                new Scenario.Settings("f32", "f32", false, false, 0, SMALL_UBATCH, 0),
                new Scenario.Settings("bf16", "bf16", false, true, 0, 0, 0),
                new Scenario.Settings("f16", "f16", false, true, 0, 0, 0),
                new Scenario.Settings("q8_0", "q8_0", true, true, 0, 0, 0),
                // a quantized V cache needs flash attention in llama.cpp
                new Scenario.Settings("f16", "q4_0", true, false, 0, SMALL_UBATCH, 0));
    }

    private record Saved(byte[] state, int length) {}

    /**
     * Schedules already run, by everything that decides their rows (settings, the tokens, the operations): families
     * share their plain schedules (a prefill of L then one-token steps is the plain side of five of them), so each is
     * computed once per setting and length. Bounded: the sweep goes length by length.
     */
    private final java.util.LinkedHashMap<String, ScheduleRun> runs = new java.util.LinkedHashMap<>(64, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(java.util.Map.Entry<String, ScheduleRun> e) { return size() > 24; }
    };

    private static String key(Scenario sc, List<Op> schedule) {
        var k = new StringBuilder(sc.settings().toString()).append('|');
        for (var op : schedule) k.append(Op.describe(op)).append(';');
        new java.util.TreeMap<>(sc.streams()).forEach((s, t) -> k.append('|').append(s).append(':').append(java.util.Arrays.toString(t)));
        return k.toString();
    }

    @Override
    public ScheduleRun run(Scenario sc, List<Op> schedule) { return run(sc, schedule, captureLayers); }

    private ScheduleRun run(Scenario sc, List<Op> schedule, boolean rows) {
        String k = key(sc, schedule) + (rows ? "|rows" : "");
        var done = runs.get(k);
        if (done != null) return done;
        var r = runFresh(sc, schedule, rows, java.util.Set.of());
        runs.put(k, r);
        return r;
    }

    /**
     * A failure judged on the logits alone, judged again on runs that capture every step's per-layer rows (the logits
     * are the same bits, so it fails the same way): its first cell is then the first row over the tolerance in causal order.
     */
    @Override
    public Outcome.Fail localize(Scenario sc, Outcome.Fail fail) {
        if (captureLayers) return fail;
        var withRows = new ArrayList<ScheduleRun>();
        for (var schedule : sc.schedules()) withRows.add(run(sc, schedule, true));
        return Judge.judge(withRows, sc, tolerance(sc.settings()), logitsDecide()) instanceof Outcome.Fail f ? f : fail;
    }

    /** @param extra graph tensors captured besides the rows ({@link RowCapture#RowCapture(java.util.Set)}) */
    private ScheduleRun runFresh(Scenario sc, List<Op> schedule, boolean rows, java.util.Set<String> extra) {
        var s = sc.settings();
        int nCtx = s.nCtx() > 0 ? s.nCtx() : capacity;
        int nBatch = s.nBatch() > 0 ? s.nBatch() : nCtx;
        int nUbatch = s.nUbatch() > 0 ? Math.min(s.nUbatch(), nBatch) : nBatch;
        var options = new LlamaContext.Options(nCtx, threads, s.typeK(), s.typeV(),
                s.flashAttention() ? LlamaContext.FlashAttention.ON : LlamaContext.FlashAttention.OFF, LlamaContext.Scheduling.WHOLE_PROMPT);
        var cells = new ArrayList<ScheduleRun.Cell>();
        var lengths = new HashMap<Integer, Integer>();
        // a sequence's position = its length in the stream + its offset (Op.Offset, Op.Shift)
        var offsets = new HashMap<Integer, Integer>();
        var tap = rows ? new RowCapture(extra) : null;
        var saved = new HashMap<String, Saved>();
        int step = 0;
        try (var ctx = new LlamaContext(model, options, new LlamaContext.Layout(nBatch, nUbatch, SEQUENCES, s.swaFull()), tap)) {
            for (int i = 0; i < schedule.size(); i++) {
                var op = schedule.get(i);
                int tokens = op instanceof Op.Feed f ? f.n() : op instanceof Op.Batch b ? b.feeds().stream().mapToInt(Op.Feed::n).sum() : 0;
                // llama.cpp asserts (aborting the process) on a batch larger than n_batch
                if (tokens > nBatch) throw new BadScheduleException(Op.describe(op) + " feeds " + tokens + " tokens in one llama_decode, more than n_batch " + nBatch);
                String refused = switch (op) {
                    case Op.Feed f -> feed(ctx, tap, sc, List.of(f), lengths, offsets, cells, step++);
                    case Op.Batch b -> feed(ctx, tap, sc, b.feeds(), lengths, offsets, cells, step++);
                    case Op.Offset o -> {
                        if (lengths.getOrDefault(o.seq(), 0) > 0) throw new BadScheduleException(Op.describe(op) + ": only an empty sequence starts at an offset");
                        offsets.merge(o.seq(), o.n(), Integer::sum);
                        yield null;
                    }
                    case Op.Shift sh -> {
                        // llama.cpp aborts the process at the next decode when its memory cannot shift: ask first
                        if (!ctx.canShift()) yield "llama_memory_can_shift is false: this model's cache does not move positions (llama_memory_seq_add)";
                        int off = offsets.getOrDefault(sh.seq(), 0);
                        if (off + sh.delta() < 0) throw new BadScheduleException(Op.describe(op) + ": moves sequence " + sh.seq() + " below position 0");
                        ctx.seqAdd(seq(sh.seq()), -1, -1, sh.delta());
                        offsets.put(sh.seq(), off + sh.delta());
                        yield null;
                    }
                    case Op.Snapshot sn -> {
                        saved.put(sn.name(), new Saved(ctx.stateSeqGet(seq(sn.seq())), lengths.getOrDefault(sn.seq(), 0)));
                        yield null;
                    }
                    case Op.Restore r -> {
                        var sv = saved.get(r.name());
                        if (sv == null) throw new BadScheduleException(Op.describe(op) + ": no snapshot named '" + r.name() + "' was taken before it");
                        if (!ctx.stateSeqSet(seq(r.seq()), sv.state())) yield "llama_state_seq_set_data could not load the snapshot";
                        lengths.put(r.seq(), sv.length());
                        yield null;
                    }
                    case Op.Truncate t -> {
                        int len = lengths.getOrDefault(t.seq(), 0);
                        if (t.length() > len) throw new BadScheduleException(Op.describe(op) + ": sequence " + t.seq() + " holds only " + len + " positions");
                        if (!ctx.seqRm(seq(t.seq()), t.length() + offsets.getOrDefault(t.seq(), 0), -1)) yield "llama_memory_seq_rm returned false";
                        lengths.put(t.seq(), t.length());
                        yield windowGone(ctx, t.seq(), t.length() + offsets.getOrDefault(t.seq(), 0));
                    }
                    case Op.Copy c -> {
                        int len = lengths.getOrDefault(c.from(), 0);
                        if (c.length() > len) throw new BadScheduleException(Op.describe(op) + ": sequence " + c.from() + " holds only " + len + " positions");
                        ctx.seqRm(seq(c.to()), -1, -1);
                        ctx.seqCp(seq(c.from()), seq(c.to()), -1, -1);
                        ctx.seqRm(seq(c.to()), c.length() + offsets.getOrDefault(c.from(), 0), -1);
                        offsets.put(c.to(), offsets.getOrDefault(c.from(), 0));
                        lengths.put(c.to(), c.length());
                        yield windowGone(ctx, c.to(), c.length() + offsets.getOrDefault(c.to(), 0));
                    }
                };
                if (refused != null) return new ScheduleRun(cells, List.of(), new ScheduleRun.Refusal(i, Op.describe(op), refused), null, step);
            }
        }
        return new ScheduleRun(cells, List.of(), null, null, step);
    }

    private static int seq(int id) {
        if (id >= SEQUENCES) throw new BadScheduleException("sequence " + id + ": the llama.cpp runner holds sequences 0…" + (SEQUENCES - 1));
        return id;
    }

    /**
     * The refusal llama.cpp's API gives for a cut its sliding-window cache cannot honour: after it, the sequence's
     * smallest held position (llama_memory_seq_pos_min) lies past the first one the next token at {@code length} reads.
     */
    private String windowGone(LlamaContext ctx, int seq, int length) {
        if (length == 0) return null;
        int min = ctx.seqPosMin(seq(seq)), need = Math.max(0, length - config.slidingWindow());
        if (min > need)
            return "llama_memory_seq_pos_min is " + min + " after the cut: the sliding-window cache no longer holds positions " + need + "…" + (min - 1)
                    + " that the next token at " + length + " reads";
        return null;
    }

    private String feed(LlamaContext ctx, RowCapture tap, Scenario sc, List<Op.Feed> feeds, HashMap<Integer, Integer> lengths,
                        HashMap<Integer, Integer> offsets, List<ScheduleRun.Cell> cells, int step) {
        int n = feeds.stream().mapToInt(Op.Feed::n).sum();
        int[] tok = new int[n], pos = new int[n], seq = new int[n];
        boolean[] out = new boolean[n];
        int k = 0;
        for (var f : feeds) {
            int at = lengths.getOrDefault(f.seq(), 0), off = offsets.getOrDefault(f.seq(), 0);
            int[] t = EngineScenarios.tokens(sc, f.seq(), at, f.n());
            for (int j = 0; j < f.n(); j++, k++) {
                tok[k] = t[j];
                pos[k] = off + at + j;
                seq[k] = seq(f.seq());
                out[k] = true;
            }
        }
        int rc = ctx.decode(tok, pos, seq, out);
        var rows = tap != null ? tap.take() : List.<RowCapture.Row>of();
        if (rc != 0) return "llama_decode returned " + rc + (rc == 1 ? " (no room in the KV cache)" : "");
        // rows are compared at their place in the stream; q and k of a sequence placed at an offset carry the
        // rotation of the position they were computed at, which only the keys' re-rotation (K-shift) brings back
        for (var r : rows) {
            if (r.entry() >= n) continue;
            int logical = pos[r.entry()] - offsets.getOrDefault(seq[r.entry()], 0);
            if (logical != pos[r.entry()] && rotated(r.point())) continue;
            cells.add(new ScheduleRun.Cell(step, seq[r.entry()], logical, r.point(), r.data()));
        }
        for (int i = 0; i < n; i++)
            cells.add(new ScheduleRun.Cell(step, seq[i], pos[i] - offsets.getOrDefault(seq[i], 0), CapturePoints.LOGITS, ctx.logitsAt(i)));
        for (var f : feeds) lengths.merge(f.seq(), f.n(), Integer::sum);
        return null;
    }

    /**
     * Flash attention has two CPU kernels: a step of at least 64 query rows (GGML_FA_TILE_Q) runs the tiled one,
     * which accumulates P·V in f32; a shorter step (a decode, a small chunk) the one-row kernel, which accumulates it in
     * f16 over every cell read, so its rounding grows with the context. Two schedules that split the same rows into
     * different steps part by that rounding, not by a cache bug: re-run without flash attention (where the V cache
     * allows it) and, if the schedules then agree at the exact path's tolerance, the disagreement was that rounding.
     */
    @Override
    public Outcome precision(Scenario sc, Outcome.Fail fail) {
        if (config.moe()) {
            // which row departs first needs the rows: a failure is judged on the logits
            var at = localize(sc, fail);
            String tie = CapturePoints.kindOf(at.point()).equals(CapturePoints.MOE_OUT) ? routerTie(sc, at) : null;
            if (tie != null) return new Outcome.Pass(at.cells(), at.relL2(), tie);
        }
        var s = sc.settings();
        if (!s.flashAttention() || s.typeV().startsWith("q")) return fail;
        var off = new Scenario.Settings(s.typeK(), s.typeV(), false, s.swaFull(), s.nBatch(), s.nUbatch(), s.nCtx());
        var without = new Scenario(sc.name(), sc.family(), sc.boundary(), sc.streams(), sc.schedules(), off, sc.undefinedWhy());
        if (!(Judge.verdict(this, without) instanceof Outcome.Pass p)) return fail;
        return new Outcome.Pass(p.cells(), fail.relL2(), String.format(java.util.Locale.ROOT,
                "flash attention's one-row kernel accumulates P·V in f16: %s of schedule %c parts by rel L2 %.3g with it and the schedules agree without it (worst %.3g)",
                fail.cell(), (char) ('A' + fail.schedule()), fail.relL2(), p.worstRelL2()));
    }

    /**
     * A mixture-of-experts router whose best experts tie to a few ulps picks another expert when the row it scores moves
     * by rounding, and its layer's moe.out then parts by far more than any tolerance. The failure is that when it is
     * the first cell (every row before it in causal order agrees), the router's logits of that row agree to the
     * tolerance in both schedules, and its top-k experts differ: the reason, else null. Rows after the flip are its
     * consequence; a cache bug shows before it or in another scenario.
     */
    private String routerTie(Scenario sc, Outcome.Fail fail) {
        int layer = CapturePoints.layerOf(fail.point());
        String name = "ffn_moe_logits";
        String point = name + "-" + layer;
        float[] ref = null, got = null;
        // the Judge's reference is the first schedule's last row at the cell; the departing schedule's is the failing step's
        for (var c : runFresh(sc, sc.schedules().getFirst(), true, java.util.Set.of(name)).cells())
            if (c.seq() == fail.seq() && c.position() == fail.position() && c.point().equals(point)) ref = c.data();
        for (var c : runFresh(sc, sc.schedules().get(fail.schedule()), true, java.util.Set.of(name)).cells())
            if (c.step() == fail.step() && c.seq() == fail.seq() && c.position() == fail.position() && c.point().equals(point)) got = c.data();
        if (ref == null || got == null || ref.length != got.length) return null;
        double rel = dev.decodiff.harness.compare.CellStats.relL2(got, ref);
        if (!(rel <= tolerance(sc.settings()))) return null;
        var a = topK(ref, config.topKExperts());
        var b = topK(got, config.topKExperts());
        if (a.equals(b)) return null;
        return String.format(java.util.Locale.ROOT,
                "layer %d's router ties: at %s its logits agree to rel L2 %.2g between the schedules, yet pick experts %s in schedule A and %s in schedule %c (%s parts by rel L2 %.3g)",
                layer, "sequence " + fail.seq() + ", position " + fail.position(), rel, a, b, (char) ('A' + fail.schedule()), fail.point(), fail.relL2());
    }

    /** The k largest entries' indices, in ascending index order. */
    private static java.util.SortedSet<Integer> topK(float[] logits, int k) {
        Integer[] idx = new Integer[logits.length];
        for (int i = 0; i < idx.length; i++) idx[i] = i;
        java.util.Arrays.sort(idx, (x, y) -> Float.compare(logits[y], logits[x]));
        return new java.util.TreeSet<>(java.util.Arrays.asList(idx).subList(0, Math.min(k, idx.length)));
    }

    private static boolean rotated(String point) {
        String kind = CapturePoints.kindOf(point);
        return kind.equals(CapturePoints.Q) || kind.equals(CapturePoints.K);
    }

    @Override
    public void close() { model.close(); }
}
