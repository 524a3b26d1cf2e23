package dev.decodiff.harness.bench;

import dev.decodiff.engine.Sampler;
import dev.decodiff.harness.llamacpp.GgufCache;
import dev.decodiff.llamacpp.LlamaCppRunner;
import dev.decodiff.llamacpp.ffi.LlamaContext;
import dev.decodiff.llamacpp.gguf.GgufOutputType;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * {@code bench --against llama.cpp}: the bench model through decodiff and through llama.cpp (the checkpoint converted
 * to a bf16 GGUF, cached), in rounds, one engine after the other within each round, so that drift over the run hits
 * both alike. Each engine reads the same prompt token ids, decodes greedily, keeps its K/V in f32 (llama.cpp's default
 * f16 cache would not be the same work) and uses the same number of threads. Per round and engine: for each of
 * {@link BenchSetup#CONTEXTS}, a fresh context reads that many prompt tokens (the 512-token read is the prefill
 * figure), then decodes {@code decodeSteps} tokens.
 */
record AgainstLlamaCpp(String release, int threads, Rounds decodiff, Rounds llamaCpp) {

    /** Per round: decode tokens/s by context, and prefill tokens/s of {@link BenchSetup#PREFILL} tokens. */
    record Rounds(Map<Integer, double[]> decodeTps, double[] prefillTps) {
        static Rounds of(int rounds) {
            var d = new LinkedHashMap<Integer, double[]>();
            for (int c : BenchSetup.CONTEXTS) d.put(c, new double[rounds]);
            return new Rounds(d, new double[rounds]);
        }
    }

    /** One engine as the bench drives it: a fresh context that reads a prompt, then single-token steps. */
    private interface Engine {
        float[] read(int[] prompt);

        float[] step(int token);
    }

    static AgainstLlamaCpp measure(BenchSetup b, int threads) {
        b.log().accept("against llama.cpp: converting the bench checkpoint to a bf16 GGUF (cached)…");
        var gguf = GgufCache.of(b.checkpoint(), GgufOutputType.BF16);
        int room = LlamaContext.Options.lengthFor(b.maxContext() + b.decodeSteps() + 1);
        var options = new LlamaContext.Options(room, threads, "f32", "f32", false);
        try (var runner = LlamaCppRunner.open(gguf, options, null)) {
            Engine ours = new Engine() {
                dev.decodiff.engine.InferenceSession s;

                public float[] read(int[] prompt) {
                    s = b.model().newSession();
                    return s.forward(prompt);
                }

                public float[] step(int token) { return s.forward(new int[]{token}); }
            };
            Engine theirs = new Engine() {
                int pos;

                public float[] read(int[] prompt) {
                    runner.reset();
                    pos = prompt.length;
                    return runner.decode(prompt, 0);
                }

                public float[] step(int token) { return runner.decode(new int[]{token}, pos++); }
            };
            b.log().accept("against llama.cpp: warm-up…");
            run(b, theirs, Rounds.of(1), 0); // llama.cpp's first graphs and page faults, untimed (decodiff warmed up in its own prefill phase)
            var d = Rounds.of(b.repeats());
            var l = Rounds.of(b.repeats());
            for (int r = 0; r < b.repeats(); r++) {
                b.log().accept("against llama.cpp: round " + (r + 1) + "/" + b.repeats() + ", decodiff then llama.cpp…");
                run(b, ours, d, r);
                run(b, theirs, l, r);
            }
            return new AgainstLlamaCpp(LlamaCppRunner.describeRelease(), threads, d, l);
        }
    }

    private static void run(BenchSetup b, Engine e, Rounds into, int round) {
        for (int c : BenchSetup.CONTEXTS) {
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

    double[] decodeRatios(int context) { return ratios(decodiff.decodeTps().get(context), llamaCpp.decodeTps().get(context)); }

    double[] prefillRatios() { return ratios(decodiff.prefillTps(), llamaCpp.prefillTps()); }
}
