package dev.decodiff.harness.bench;

import dev.decodiff.engine.Sampler;
import dev.decodiff.engine.arch.Architectures;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.arch.ArchitectureSupports;
import dev.decodiff.harness.arch.BenchModel;
import dev.decodiff.metal.HugePageMemory;
import dev.decodiff.metal.NativeKernels;
import dev.decodiff.metal.Parallel;
import dev.decodiff.metal.StreamRead;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;

/**
 * {@code bench --size qwen35-…}: the Qwen3.5 engine on a random checkpoint of a released geometry, in bf16 and as its
 * MLX 4-bit conversion (group 64), both loaded in this process and measured in one run against the machine's read
 * ceiling: the native prefetching reader over each model's streamed weights where the engine reads them and over
 * anonymous memory (on huge pages where there are), passes alternating; a 512-token prefill of each model in turn;
 * greedy decode at contexts 128 / 512 / 2048 of both models, one step of each of the six sessions in turn, a read
 * pass over the bf16 weights after each round (the host's bandwidth drifts over minutes: each step is also paired
 * with the pass of its own round); per step, the time the Gated DeltaNet layers spent between their projections (the
 * conv, gates, the delta rule's state update and read; not the gated norm and out_proj), which the session clocks itself; and the
 * process's peak resident set.
 */
final class QwenBench {
    private QwenBench() {}

    static final int[] CONTEXTS = BenchSetup.CONTEXTS;
    static final int PREFILL = BenchSetup.PREFILL;
    static final int WARM_UP_STEPS = 16;

    /** One model's figures; per-context maps are keyed by context length. */
    record Model(String name, String directory, String placement, long bytesPerToken, long rssAddedBytes, Figure prefillTokensPerS,
                 Map<Integer, Figure> decodeTokensPerS, Map<Integer, Figure> overRoundPass, Map<Integer, Figure> recurrentMsPerToken,
                 Map<Integer, Figure> recurrentShare, Figure kernelsOverRoundPass, Map<Integer, Figure> decodeOverKernels) {}

    record Result(QwenBenchSpec spec, Machine machine, Figure weightsReadGbs, Figure anonymousReadGbs, boolean anonymousHugePages,
                  Figure roundReadGbs, List<Model> models, long peakRssBytes, int steps, QwenAgainstLlamaCpp against) {
        /** The ceiling: the best single pass of any reader over any memory, the passes between decode rounds included. */
        double bestReadGbs() { return Math.max(Math.max(weightsReadGbs.max(), anonymousReadGbs.max()), roundReadGbs.max()); }
    }

    /** With {@code againstLlamaCpp}, the bf16 model also runs beside llama.cpp at the end ({@link QwenAgainstLlamaCpp}). */
    static Result measure(QwenBenchSpec spec, Path bf16Dir, int steps, int repeats, boolean againstLlamaCpp, Consumer<String> log) throws IOException {
        if (!NativeKernels.available()) throw new BadInputException("the Qwen3.5 bench needs the native kernels (its read ceiling is their reader): "
                + NativeKernels.status());
        Path q4Dir = QuantizedDecode.conversion(bf16Dir, 4, log);
        var dirs = List.of(bf16Dir, q4Dir);
        var names = List.of("bf16", "4-bit");
        // the family's own bench view of its model: its streamed weights and its recurrent mixer's time
        var loader = ArchitectureSupports.of(Architectures.of(bf16Dir)).benchModel().orElseThrow(
                () -> new BadInputException(bf16Dir, "is not a checkpoint of a family with its own decode bench"));
        var models = new ArrayList<BenchModel>();
        long[] rss = new long[2];
        try {
            for (int i = 0; i < 2; i++) {
                long before = MeasuredRun.RssSampler.statusBytes("VmRSS:");
                log.accept("loading " + names.get(i) + " (" + dirs.get(i).getFileName() + ")…");
                models.add(loader.load(dirs.get(i)));
                rss[i] = MeasuredRun.RssSampler.statusBytes("VmRSS:") - before;
            }
            int vocab = models.getFirst().vocabSize();
            int[] prompt = BenchSetup.randomPrompt(spec.seed(), vocab, CONTEXTS[CONTEXTS.length - 1]);
            var streamed = new ArrayList<List<MemorySegment>>();
            for (var m : models) streamed.add(m.streamedWeights());
            int threads = Parallel.threads();

            // ceilings, passes alternating over the two models' weights and anonymous memory
            log.accept("read bandwidth (" + threads + " threads; kernels: " + NativeKernels.status() + ")…");
            Figure weightsGbs, anonGbs;
            boolean huge = HugePageMemory.available();
            try (var arena = Arena.ofShared()) {
                var anon = huge ? HugePageMemory.allocate(ReadBandwidth.ANONYMOUS_BYTES, arena).fill((byte) 0)
                        : arena.allocate(ReadBandwidth.ANONYMOUS_BYTES, 2 << 20).fill((byte) 0);
                for (var s : streamed) StreamRead.secondsEqualShares(s, threads, true); // page in
                StreamRead.secondsEqualShares(anon, threads, true);
                int passes = 2 * repeats + 1;
                double[] w = new double[passes * streamed.size()], a = new double[passes];
                for (int p = 0; p < passes; p++) {
                    for (int k = 0; k < streamed.size(); k++)
                        w[p * streamed.size() + k] = gigabytes(streamed.get(k)) / StreamRead.secondsEqualShares(streamed.get(k), threads, true);
                    a[p] = anon.byteSize() / 1e9 / StreamRead.secondsEqualShares(anon, threads, true);
                }
                weightsGbs = Figure.of(w);
                anonGbs = Figure.of(a);
            }

            // warm-up (the JIT compiles prefill and decode paths, untimed), then the prefill of each model in turn
            log.accept("warm-up…");
            for (var m : models) {
                var s = m.newSession();
                int next = Sampler.argmax(s.forward(java.util.Arrays.copyOf(prompt, PREFILL)));
                for (int i = 0; i < WARM_UP_STEPS; i++) next = Sampler.argmax(s.forward(new int[]{next}));
            }
            log.accept("prefill " + PREFILL + " tokens ×" + repeats + ", the models in turn…");
            double[][] prefillSec = new double[2][repeats];
            var at512 = new BenchModel.Session[2];
            var logits512 = new float[2][];
            for (int r = 0; r < repeats; r++)
                for (int k = 0; k < 2; k++) {
                    int i = (r + k) % 2; // which model goes first alternates
                    var s = models.get(i).newSession();
                    long t0 = System.nanoTime();
                    logits512[i] = s.forward(java.util.Arrays.copyOf(prompt, PREFILL));
                    prefillSec[i][r] = BenchSetup.secondsSince(t0);
                    at512[i] = s;
                }

            // the sessions at 128 and 2048, then decode: one step of each of the six in turn, a read pass after each round
            log.accept("prompts of 128 and " + CONTEXTS[2] + " tokens…");
            int n = 2 * CONTEXTS.length;
            var sessions = new BenchModel.Session[n];
            var next = new int[n];
            for (int i = 0; i < 2; i++)
                for (int c = 0; c < CONTEXTS.length; c++) {
                    int k = i * CONTEXTS.length + c;
                    float[] logits;
                    if (CONTEXTS[c] == PREFILL) {
                        sessions[k] = at512[i];
                        logits = logits512[i];
                    } else {
                        sessions[k] = models.get(i).newSession();
                        logits = sessions[k].forward(java.util.Arrays.copyOf(prompt, CONTEXTS[c]));
                    }
                    next[k] = Sampler.argmax(logits);
                }
            log.accept("decode @" + CONTEXTS[0] + "/" + CONTEXTS[1] + "/" + CONTEXTS[2] + ", bf16 and 4-bit, one step of each in turn, " + steps + " rounds…");
            double[][] sec = new double[n][steps], recurrent = new double[n][steps], kernels = new double[2][steps];
            double[] passes = new double[steps];
            var kernelPasses = new ArrayList<KernelPass>();
            for (var m : models) kernelPasses.add(new KernelPass(m.streamedMatrices(), spec.seed()));
            var bf16Weights = streamed.getFirst();
            double bf16Gb = gigabytes(bf16Weights);
            for (int r = 0; r < steps; r++) {
                for (int k = 0; k < n; k++) {
                    long r0 = sessions[k].recurrentNanos(), t0 = System.nanoTime();
                    next[k] = Sampler.argmax(sessions[k].forward(new int[]{next[k]}));
                    sec[k][r] = BenchSetup.secondsSince(t0);
                    recurrent[k][r] = (sessions[k].recurrentNanos() - r0) / 1e9;
                }
                for (int i = 0; i < 2; i++) kernels[i][r] = kernelPasses.get(i).gbs();
                passes[r] = bf16Gb / StreamRead.secondsEqualShares(bf16Weights, threads, true);
            }

            var out = new ArrayList<Model>();
            for (int i = 0; i < 2; i++) {
                long bytes = models.get(i).weightBytesPerToken();
                var tps = new LinkedHashMap<Integer, Figure>();
                var paired = new LinkedHashMap<Integer, Figure>();
                var recMs = new LinkedHashMap<Integer, Figure>();
                var recShare = new LinkedHashMap<Integer, Figure>();
                var overKernels = new LinkedHashMap<Integer, Figure>();
                double[] kernelsOverPass = new double[steps];
                for (int r = 0; r < steps; r++) kernelsOverPass[r] = kernels[i][r] / passes[r];
                for (int c = 0; c < CONTEXTS.length; c++) {
                    int k = i * CONTEXTS.length + c;
                    tps.put(CONTEXTS[c], Figure.rates(1, sec[k]));
                    paired.put(CONTEXTS[c], Decode.overPasses(bytes, sec[k], passes));
                    double[] ms = new double[steps], share = new double[steps];
                    for (int r = 0; r < steps; r++) {
                        ms[r] = recurrent[k][r] * 1e3;
                        share[r] = recurrent[k][r] / sec[k][r];
                    }
                    recMs.put(CONTEXTS[c], Figure.of(ms));
                    recShare.put(CONTEXTS[c], Figure.of(share));
                    double[] dk = new double[steps];
                    for (int r = 0; r < steps; r++) dk[r] = bytes / 1e9 / sec[k][r] / kernels[i][r];
                    overKernels.put(CONTEXTS[c], Figure.of(dk));
                }
                out.add(new Model(names.get(i), dirs.get(i).getFileName().toString(), models.get(i).weightPlacement(), bytes, rss[i], Figure.rates(PREFILL, prefillSec[i]), tps, paired,
                        recMs, recShare, Figure.of(kernelsOverPass), overKernels));
            }
            // decodiff's own peak, before llama.cpp's contexts join the process
            long peakRss = Machine.peakRss();
            QwenAgainstLlamaCpp against = null;
            if (againstLlamaCpp) {
                var work = new AgainstLlamaCpp.Workload() {
                    public int[] prompt(int context) { return java.util.Arrays.copyOf(prompt, context); }

                    public int decodeSteps() { return steps; }
                };
                against = QwenAgainstLlamaCpp.measure(bf16Dir, models.getFirst(), work, repeats, threads, log);
            }
            return new Result(spec, Machine.current(), weightsGbs, anonGbs, huge, Figure.of(passes), out, peakRss, steps, against);
        } finally {
            for (var m : models) m.close();
        }
    }

    private static double gigabytes(List<MemorySegment> segments) {
        long b = 0;
        for (var s : segments) b += s.byteSize() / 256 * 256;
        return b / 1e9;
    }
}
