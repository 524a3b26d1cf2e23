package dev.decodiff.harness.bench;

import dev.decodiff.engine.Sampler;
import dev.decodiff.engine.arch.ModelSession;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Time to first token of a {@code maxContext}-token request read cold (also what re-reading a whole conversation
 * costs), then greedy decode at each of {@link BenchSetup#CONTEXTS}: 128 (its own session), 512 (the prefilled
 * session) and 2048 (the cold one), one step of each in turn, so that drift over the run (other tenants, clocks)
 * hits the three alike and their ratio is measured in one stretch of time. After each round of steps the prefetching
 * reader makes one pass over the same weights ({@code readGbs}): this machine's memory bandwidth drifts over minutes
 * (other tenants), so a ceiling read only before decode could sit below what decode itself then moved. On a host
 * whose bandwidth swings by half within a minute, the best pass is a moment decode rarely shares: {@code overRoundPass}
 * pairs each step with the pass that follows its round, the reader and decode a few tenths of a second apart.
 *
 * @param readGbs the reader's passes between decode rounds; null where there is no native reader
 * @param overRoundPass per context, each step's weight traffic over the read pass right after its round; null
 *                      where there is no native reader
 */
record Decode(Figure ttftColdS, Map<Integer, Figure> tokensPerS, Figure readGbs, Map<Integer, Figure> overRoundPass) {

    static Decode measure(BenchSetup b, Prefill.Primed at512) {
        b.log().accept("TTFT: " + b.maxContext() + " tokens cold…");
        var cold = b.session();
        long t0 = System.nanoTime();
        float[] coldLogits = cold.forward(b.prompt(b.maxContext()));
        Figure ttft = Figure.of(BenchSetup.secondsSince(t0));
        var s128 = b.session();
        float[] l128 = s128.forward(b.prompt(128));
        b.log().accept("decode @128/512/2048, interleaved…");
        var passes = new double[b.decodeSteps()];
        int[] round = {0};
        var reader = ReadBandwidth.nativeReader(b);
        Runnable read = reader == null ? () -> {} : () -> passes[round[0]++] = reader.getAsDouble();
        double[][] sec = stepSeconds(new ModelSession[]{s128, at512.session(), cold}, new float[][]{l128, at512.logits(), coldLogits},
                b.decodeSteps(), read);
        var tps = new LinkedHashMap<Integer, Figure>();
        for (int k = 0; k < BenchSetup.CONTEXTS.length; k++) tps.put(BenchSetup.CONTEXTS[k], Figure.rates(1, sec[k]));
        if (round[0] == 0) return new Decode(ttft, tps, null, null);
        var paired = new LinkedHashMap<Integer, Figure>();
        for (int k = 0; k < BenchSetup.CONTEXTS.length; k++)
            paired.put(BenchSetup.CONTEXTS[k], overPasses(b.weights().weightBytesPerToken(), sec[k], passes));
        return new Decode(ttft, tps, Figure.of(passes), paired);
    }

    /** Each step's weight traffic ({@code bytes} over its seconds) over the read pass (GB/s) of the same round. */
    static Figure overPasses(long bytes, double[] seconds, double[] passGbs) {
        double[] r = new double[seconds.length];
        for (int i = 0; i < r.length; i++) r[i] = bytes / seconds[i] / 1e9 / passGbs[i];
        return Figure.of(r);
    }

    /** Greedy decode steps on one or several sessions, one step of each in turn; tokens/s per step, by context. */
    static Map<Integer, Figure> interleaved(ModelSession[] sessions, float[][] logits, int[] contexts, int steps) {
        double[][] sec = stepSeconds(sessions, logits, steps);
        var out = new LinkedHashMap<Integer, Figure>();
        for (int k = 0; k < sessions.length; k++) out.put(contexts[k], Figure.rates(1, sec[k]));
        return out;
    }

    /** Greedy decode steps on the sessions, one step of each in turn, from their last logits: seconds per step and session. */
    static double[][] stepSeconds(ModelSession[] sessions, float[][] logits, int steps) { return stepSeconds(sessions, logits, steps, () -> {}); }

    /** {@link #stepSeconds(ModelSession[], float[][], int)}, running {@code betweenRounds} after each round of steps. */
    static double[][] stepSeconds(ModelSession[] sessions, float[][] logits, int steps, Runnable betweenRounds) {
        int[] next = new int[sessions.length];
        double[][] sec = new double[sessions.length][steps];
        for (int k = 0; k < sessions.length; k++) {
            sessions[k].setProbe(null);
            next[k] = Sampler.argmax(logits[k]);
        }
        for (int i = 0; i < steps; i++) {
            for (int k = 0; k < sessions.length; k++) {
                long t0 = System.nanoTime();
                next[k] = Sampler.argmax(sessions[k].forward(new int[]{next[k]}));
                sec[k][i] = BenchSetup.secondsSince(t0);
            }
            betweenRounds.run();
        }
        return sec;
    }
}
