package dev.decodiff.harness.bench;

import dev.decodiff.harness.arch.BenchModel;
import dev.decodiff.harness.bench.AgainstLlamaCpp.Engine;
import dev.decodiff.harness.bench.AgainstLlamaCpp.Rounds;
import dev.decodiff.harness.bench.AgainstLlamaCpp.Workload;
import dev.decodiff.harness.llamacpp.GgufCache;
import dev.decodiff.llamacpp.LlamaCppRunner;
import dev.decodiff.llamacpp.ffi.LlamaContext;
import dev.decodiff.llamacpp.ffi.LlamaLibrary;
import dev.decodiff.llamacpp.gguf.GgufOutputType;

import java.nio.file.Path;
import java.util.function.Consumer;

/**
 * {@code bench --size qwen35-… --against llama.cpp}: the bf16 Qwen3.5 bench model through decodiff and through
 * llama.cpp (the same checkpoint converted to a bf16 GGUF, cached), in rounds, decodiff then llama.cpp with flash
 * attention auto and off (the two swap places each round), as {@link AgainstLlamaCpp} runs the Gemma 4 bench model: a
 * fresh context per context length reads the same prompt ids (the 512-token read is the prefill figure), then decodes
 * greedily; both keep K/V in f32, both use the same threads, llama.cpp at llama-bench's settings after an untimed
 * warm-up, and each llama.cpp figure is taken with the faster of its two flash-attention settings.
 */
record QwenAgainstLlamaCpp(String release, String build, String cpuBackend, boolean flashAttentionAuto, int threads, Rounds decodiff,
                           Rounds llamaCppFlashAuto, Rounds llamaCppFlashOff) {

    static QwenAgainstLlamaCpp measure(Path bf16Dir, BenchModel model, Workload work, int repeats, int threads, Consumer<String> log) {
        log.accept("against llama.cpp: converting the bf16 bench checkpoint to a bf16 GGUF (cached)…");
        var gguf = GgufCache.of(bf16Dir, GgufOutputType.BF16);
        int[] contexts = QwenBench.CONTEXTS;
        int room = LlamaContext.Options.lengthFor(contexts[contexts.length - 1] + work.decodeSteps() + 1);
        var auto = LlamaContext.Options.llamaBench(room, threads, "f32", "f32");
        var off = new LlamaContext.Options(room, threads, "f32", "f32", LlamaContext.FlashAttention.OFF, LlamaContext.Scheduling.LLAMA_BENCH);
        try (var runnerAuto = LlamaCppRunner.open(gguf, auto, null); var runnerOff = LlamaCppRunner.open(gguf, off, null)) {
            Engine ours = decodiff(model), theirs = AgainstLlamaCpp.llamaCpp(runnerAuto), theirsOff = AgainstLlamaCpp.llamaCpp(runnerOff);
            log.accept("against llama.cpp: warm-up…");
            AgainstLlamaCpp.run(work, theirs, Rounds.of(1, contexts), 0, contexts);
            AgainstLlamaCpp.run(work, theirsOff, Rounds.of(1, contexts), 0, contexts);
            var d = Rounds.of(repeats, contexts);
            var la = Rounds.of(repeats, contexts);
            var lo = Rounds.of(repeats, contexts);
            for (int r = 0; r < repeats; r++) {
                log.accept("against llama.cpp: round " + (r + 1) + "/" + repeats + ", decodiff then llama.cpp (flash attention auto and off), f32 K/V…");
                AgainstLlamaCpp.run(work, ours, d, r, contexts);
                boolean autoFirst = r % 2 == 0;
                AgainstLlamaCpp.run(work, autoFirst ? theirs : theirsOff, autoFirst ? la : lo, r, contexts);
                AgainstLlamaCpp.run(work, autoFirst ? theirsOff : theirs, autoFirst ? lo : la, r, contexts);
            }
            return new QwenAgainstLlamaCpp(LlamaCppRunner.describeRelease(), LlamaCppRunner.describeBuild(), LlamaLibrary.get().backend(),
                    runnerAuto.flashAttentionOn(), threads, d, la, lo);
        }
    }

    private static Engine decodiff(BenchModel model) {
        return new Engine() {
            BenchModel.Session s;

            public float[] read(int[] prompt) {
                s = model.newSession();
                return s.forward(prompt);
            }

            public float[] step(int token) { return s.forward(new int[]{token}); }
        };
    }

    /** llama.cpp at its best: per figure, the rounds of the faster flash-attention setting. */
    Rounds llamaCpp() { return AgainstLlamaCpp.best(llamaCppFlashAuto, llamaCppFlashOff); }

    boolean flashOffForDecode(int context) {
        return AgainstLlamaCpp.offFaster(llamaCppFlashAuto.decodeTps().get(context), llamaCppFlashOff.decodeTps().get(context));
    }

    boolean flashOffForPrefill() { return AgainstLlamaCpp.offFaster(llamaCppFlashAuto.prefillTps(), llamaCppFlashOff.prefillTps()); }

    String flashAttentionOf(boolean off) { return off ? "off" : "auto (" + (flashAttentionAuto ? "on" : "off") + ")"; }

    double[] decodeRatios(int context) { return AgainstLlamaCpp.ratios(decodiff.decodeTps().get(context), llamaCpp().decodeTps().get(context)); }

    double[] prefillRatios() { return AgainstLlamaCpp.ratios(decodiff.prefillTps(), llamaCpp().prefillTps()); }

    String settings() { return AgainstLlamaCpp.settings(threads, flashAttentionAuto); }
}
