package dev.decodiff.harness.bench;

import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.KvType;
import dev.decodiff.engine.Sampler;
import dev.decodiff.engine.arch.ModelSession;
import dev.decodiff.harness.llamacpp.GgufCache;
import dev.decodiff.harness.report.Fmt;
import dev.decodiff.llamacpp.LlamaCppRunner;
import dev.decodiff.llamacpp.ffi.LlamaContext;
import dev.decodiff.llamacpp.ffi.LlamaLibrary;
import dev.decodiff.llamacpp.gguf.GgufOutputType;
import dev.decodiff.metal.MatmulPrecision;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * {@code bench --against llama.cpp}: the bench model through decodiff and through llama.cpp (the checkpoint converted
 * to a bf16 GGUF, cached), in rounds, one engine after the other within each round, so that drift over the run hits
 * both alike. llama.cpp runs at llama-bench's settings ({@link LlamaContext.Options#llamaBench}: batches of 2048
 * tokens computed 512 at a time, flash attention auto, a polling threadpool of its own) after an untimed warm-up, and
 * once more with flash attention off: on a CPU "auto" turns it on, which speeds llama.cpp's prefill but slows its decode
 * over a long context, so each figure is held against the setting whose median was faster (llama.cpp at its best).
 * Both engines do the same work: every prompt token through every layer, the LM head for the last token only
 * (llama.cpp asked for the last position's logits alone, as llama-bench asks), then one token and its logits per
 * decode step. Each engine reads the same prompt token ids, decodes greedily, keeps its K/V in f32 (llama-bench's
 * default f16 cache would not be the same work) and uses the same number of threads. Per round and engine: for each
 * of {@link BenchSetup#CONTEXTS}, a fresh context reads that many prompt tokens (the 512-token read is the prefill
 * figure), then decodes {@code decodeSteps} tokens. Each round also prefills 512 tokens with decodiff's
 * {@code --matmul bf16} (against llama.cpp's prefill), and runs decodiff with bf16 K/V against llama.cpp with f16 K/V
 * (llama-bench's default, all its settings), at the prefill's context only. When the library folder holds llama.cpp's
 * own {@code llama-bench} (a cmake build does: scripts/llamacpp-native.sh's), each round also runs it as a child process
 * with exactly the settings of that last pair's llama.cpp run — same GGUF, threads, f16 K/V (llama-bench has no f32
 * cache), its batching, flash attention auto ({@link LlamaBenchTool}) — so the FFM runner's figures stand beside
 * llama.cpp's own tool's from the same build.
 */
record AgainstLlamaCpp(String release, String build, String cpuBackend, boolean flashAttentionAuto, int threads, Rounds decodiff, Rounds llamaCppFlashAuto,
                       Rounds llamaCppFlashOff, double[] decodiffBf16MatmulPrefillTps, Rounds decodiffBf16Kv, Rounds llamaCppF16Kv,
                       Rounds llamaBench) {

    /** The contexts of the 16-bit K/V pair (decodiff bf16, llama.cpp f16): the prefill's alone, to keep the run short. */
    static final int[] HALF_KV_CONTEXTS = {BenchSetup.PREFILL};

    /** Per round: decode tokens/s by context, and prefill tokens/s of {@link BenchSetup#PREFILL} tokens. */
    record Rounds(Map<Integer, double[]> decodeTps, double[] prefillTps) {
        static Rounds of(int rounds, int[] contexts) {
            var d = new LinkedHashMap<Integer, double[]>();
            for (int c : contexts) d.put(c, new double[rounds]);
            return new Rounds(d, new double[rounds]);
        }
    }

    /** What each engine runs in a round: the prompt of each context, then this many decode steps. */
    interface Workload {
        int[] prompt(int context);

        int decodeSteps();
    }

    /** One engine as the bench drives it: a fresh context that reads a prompt, then single-token steps. */
    interface Engine {
        float[] read(int[] prompt);

        float[] step(int token);
    }

    static AgainstLlamaCpp measure(BenchSetup b, int threads) {
        b.log().accept("against llama.cpp: converting the bench checkpoint to a bf16 GGUF (cached)…");
        var gguf = GgufCache.of(b.checkpoint(), GgufOutputType.BF16);
        int room = LlamaContext.Options.lengthFor(b.maxContext() + b.decodeSteps() + 1);
        var bench = LlamaContext.Options.llamaBench(room, threads, "f32", "f32");
        var flashOff = new LlamaContext.Options(room, threads, "f32", "f32", LlamaContext.FlashAttention.OFF, LlamaContext.Scheduling.LLAMA_BENCH);
        try (var runner = LlamaCppRunner.open(gguf, bench, null);
             var runnerOff = LlamaCppRunner.open(gguf, flashOff, null);
             var runnerF16 = LlamaCppRunner.open(gguf, LlamaContext.Options.llamaBench(room, threads, "f16", "f16"), null)) {
            Engine ours = decodiff(b, EngineOptions.defaults()), theirs = llamaCpp(runner), theirsOff = llamaCpp(runnerOff);
            Engine oursBf16Matmul = decodiff(b, EngineOptions.defaults().withMatmul(MatmulPrecision.BF16));
            Engine oursBf16 = decodiff(b, EngineOptions.defaults().withKvTypes(KvType.BF16, KvType.BF16)), theirsF16 = llamaCpp(runnerF16);
            var tool = LlamaLibrary.get().home().llamaBench().map(p -> new LlamaBenchTool(p, gguf, threads, "f16")).orElse(null);
            b.log().accept("against llama.cpp: warm-up…");
            // llama.cpp's first graphs and page faults, untimed, as llama-bench warms up; decodiff's f32 path warmed up
            // in its own prefill phase, its bf16 kernels compile here
            run(b, theirs, Rounds.of(1, BenchSetup.CONTEXTS), 0, BenchSetup.CONTEXTS);
            run(b, theirsOff, Rounds.of(1, BenchSetup.CONTEXTS), 0, BenchSetup.CONTEXTS);
            run(b, theirsF16, Rounds.of(1, HALF_KV_CONTEXTS), 0, HALF_KV_CONTEXTS);
            prefill(b, oursBf16Matmul);
            int n = b.repeats();
            var d = Rounds.of(n, BenchSetup.CONTEXTS);
            var la = Rounds.of(n, BenchSetup.CONTEXTS);
            var lo = Rounds.of(n, BenchSetup.CONTEXTS);
            var dm = new double[n];
            var dh = Rounds.of(n, HALF_KV_CONTEXTS);
            var lh = Rounds.of(n, HALF_KV_CONTEXTS);
            var lb = tool == null ? null : Rounds.of(n, HALF_KV_CONTEXTS);
            for (int r = 0; r < n; r++) {
                b.log().accept("against llama.cpp: round " + (r + 1) + "/" + n + ", decodiff then llama.cpp (flash attention auto and off), f32 K/V; "
                        + "--matmul bf16 prefill; then 16-bit K/V…");
                run(b, ours, d, r, BenchSetup.CONTEXTS);
                // the two llama.cpp settings swap places each round, so neither always runs right after decodiff
                boolean autoFirst = r % 2 == 0;
                run(b, autoFirst ? theirs : theirsOff, autoFirst ? la : lo, r, BenchSetup.CONTEXTS);
                run(b, autoFirst ? theirsOff : theirs, autoFirst ? lo : la, r, BenchSetup.CONTEXTS);
                dm[r] = prefill(b, oursBf16Matmul);
                run(b, oursBf16, dh, r, HALF_KV_CONTEXTS);
                run(b, theirsF16, lh, r, HALF_KV_CONTEXTS);
                if (tool != null) {
                    b.log().accept("against llama.cpp: round " + (r + 1) + "/" + n + ", llama.cpp's own llama-bench, f16 K/V…");
                    record(tool.run(BenchSetup.PREFILL, b.decodeSteps(), HALF_KV_CONTEXTS, "auto"), lb, r);
                }
            }
            return new AgainstLlamaCpp(LlamaCppRunner.describeRelease(), LlamaCppRunner.describeBuild(), LlamaLibrary.get().backend(),
                    runner.flashAttentionOn(), threads, d, la, lo, dm, dh, lh, lb);
        }
    }

    /** llama-bench's figures of one call into round {@code r}: its pp test as the prefill, its tg tests by depth as decode. */
    private static void record(java.util.List<LlamaBenchTool.Result> results, Rounds into, int r) {
        for (var x : results) {
            if (x.gen() == 0) into.prefillTps()[r] = x.tokensPerS();
            else into.decodeTps().get(x.depth())[r] = x.tokensPerS();
        }
    }

    /** Whether llama.cpp's own llama-bench ran beside the runner (the library folder has one). */
    boolean hasLlamaBench() { return llamaBench != null; }

    /** The FFM runner's f16-K/V decode at {@link BenchSetup#PREFILL} over llama-bench's, round by round. */
    double[] runnerOverLlamaBenchDecode() {
        return ratios(llamaCppF16Kv.decodeTps().get(BenchSetup.PREFILL), llamaBench.decodeTps().get(BenchSetup.PREFILL));
    }

    double[] runnerOverLlamaBenchPrefill() { return ratios(llamaCppF16Kv.prefillTps(), llamaBench.prefillTps()); }

    /** Tokens/s of one {@link BenchSetup#PREFILL}-token read in a fresh context. */
    private static double prefill(BenchSetup b, Engine e) {
        long t0 = System.nanoTime();
        e.read(b.prompt(BenchSetup.PREFILL));
        return BenchSetup.PREFILL / BenchSetup.secondsSince(t0);
    }

    private static Engine decodiff(BenchSetup b, EngineOptions options) {
        return new Engine() {
            ModelSession s;

            public float[] read(int[] prompt) {
                s = b.session(options);
                return s.forward(prompt);
            }

            public float[] step(int token) { return s.forward(new int[]{token}); }
        };
    }

    static Engine llamaCpp(LlamaCppRunner runner) {
        return new Engine() {
            int pos;

            public float[] read(int[] prompt) {
                runner.reset();
                pos = prompt.length;
                return runner.decode(prompt, 0);
            }

            public float[] step(int token) { return runner.decode(new int[]{token}, pos++); }
        };
    }

    /**
     * Per context: a fresh context reads the prompt (the {@link BenchSetup#PREFILL}-token read is the round's prefill
     * figure), then the decode steps, greedy; tokens/s into round {@code round}.
     */
    static void run(Workload b, Engine e, Rounds into, int round, int[] contexts) {
        for (int c : contexts) {
            long t0 = System.nanoTime();
            int next = Sampler.argmax(e.read(b.prompt(c)));
            double read = BenchSetup.secondsSince(t0);
            if (c == BenchSetup.PREFILL) into.prefillTps()[round] = c / read;
            t0 = System.nanoTime();
            for (int i = 0; i < b.decodeSteps(); i++) next = Sampler.argmax(e.step(next));
            into.decodeTps().get(c)[round] = b.decodeSteps() / BenchSetup.secondsSince(t0);
        }
    }

    /** decodiff over llama.cpp, round by round. */
    static double[] ratios(double[] ours, double[] theirs) {
        var r = new double[ours.length];
        for (int i = 0; i < r.length; i++) r[i] = ours[i] / theirs[i];
        return r;
    }

    /** Whether flash attention off gave llama.cpp the higher median for these per-round figures than llama-bench's auto. */
    static boolean offFaster(double[] auto, double[] off) { return Figure.of(off).median() > Figure.of(auto).median(); }

    /** llama.cpp at its best of two settings: per figure, the rounds of the one with the higher median. */
    static Rounds best(Rounds auto, Rounds off) {
        var d = new LinkedHashMap<Integer, double[]>();
        for (int c : auto.decodeTps().keySet()) d.put(c, (offFaster(auto.decodeTps().get(c), off.decodeTps().get(c)) ? off : auto).decodeTps().get(c));
        return new Rounds(d, (offFaster(auto.prefillTps(), off.prefillTps()) ? off : auto).prefillTps());
    }

    /** Whether llama.cpp's decode at {@code context} is taken with flash attention off (it was faster there). */
    boolean flashOffForDecode(int context) { return offFaster(llamaCppFlashAuto.decodeTps().get(context), llamaCppFlashOff.decodeTps().get(context)); }

    boolean flashOffForPrefill() { return offFaster(llamaCppFlashAuto.prefillTps(), llamaCppFlashOff.prefillTps()); }

    /** llama.cpp at its best: per figure, the rounds of the flash-attention setting with the higher median. */
    Rounds llamaCpp() { return best(llamaCppFlashAuto, llamaCppFlashOff); }

    /** The flash-attention setting a figure was taken with, in words. */
    String flashAttentionOf(boolean off) { return off ? "off" : "auto (" + (flashAttentionAuto ? "on" : "off") + ")"; }

    double[] decodeRatios(int context) { return ratios(decodiff.decodeTps().get(context), llamaCpp().decodeTps().get(context)); }

    double[] prefillRatios() { return ratios(decodiff.prefillTps(), llamaCpp().prefillTps()); }

    /** decodiff's {@code --matmul bf16} prefill over llama.cpp's (f32 K/V both), round by round. */
    double[] bf16MatmulPrefillRatios() { return ratios(decodiffBf16MatmulPrefillTps, llamaCpp().prefillTps()); }

    /** The llama.cpp settings, in words, for the report. */
    String settings() { return settings(threads, flashAttentionAuto); }

    static String settings(int threads, boolean flashAttentionAuto) {
        return Fmt.format("llama-bench's settings: n_batch %d, n_ubatch %d, threadpool poll %d, %d threads, logits of the last token only; "
                        + "flash attention auto (%s) and off, each figure against the faster",
                LlamaContext.Scheduling.BENCH_BATCH, LlamaContext.Scheduling.BENCH_UBATCH, LlamaContext.Scheduling.BENCH_POLL, threads,
                flashAttentionAuto ? "on" : "off");
    }

    /** decodiff with bf16 K/V over llama.cpp with f16 K/V, decode at {@link BenchSetup#PREFILL}, round by round. */
    double[] halfKvDecodeRatios() {
        return ratios(decodiffBf16Kv.decodeTps().get(BenchSetup.PREFILL), llamaCppF16Kv.decodeTps().get(BenchSetup.PREFILL));
    }

    double[] halfKvPrefillRatios() { return ratios(decodiffBf16Kv.prefillTps(), llamaCppF16Kv.prefillTps()); }
}
