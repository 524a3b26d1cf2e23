package dev.decodiff.harness.bench;

import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.arch.Architectures;
import dev.decodiff.engine.arch.LoadedModel;
import dev.decodiff.engine.arch.ModelSession;
import dev.decodiff.harness.arch.ArchitectureSupports;
import dev.decodiff.harness.arch.BenchModel;
import dev.decodiff.harness.arch.TunableEngine;

import java.nio.file.Path;
import java.util.SplittableRandom;
import java.util.function.Consumer;

/**
 * What every measured phase of a bench run shares: the loaded bench model, the engine that runs it under any engine
 * options and the bench's view of its weights (both its family's, through the plug-in: the phases measure that engine
 * itself, not only what the seam offers), its checkpoint folder, a prompt of random token ids long enough for the
 * longest context, the repeat counts, a scratch folder and the progress log.
 *
 * @param weights the bench's view of {@code model}, sharing it (closed with it)
 */
record BenchSetup(LoadedModel model, TunableEngine engine, BenchModel weights, Path checkpoint, int[] prompt, int repeats, int decodeSteps,
                  Path work, Consumer<String> log) implements AutoCloseable, AgainstLlamaCpp.Workload {
    static final int[] CONTEXTS = {128, 512, 2048};
    static final int PREFILL = 512;
    /** The shared prefix of a stored snapshot, and the new tokens a request or turn adds to it. */
    static final int PREFIX = 2000;

    /** The bench checkpoint loaded for any length by its family's tunable engine (closed with the setup). */
    static BenchSetup load(BenchSpec spec, Path checkpoint, int repeats, int decodeSteps, Path work, Consumer<String> log) {
        var arch = Architectures.of(checkpoint);
        var engine = ArchitectureSupports.of(arch).tunableEngine()
                .orElseThrow(() -> new IllegalStateException("the bench measures a tunable engine; " + arch.name() + " has none"));
        var model = engine.load(checkpoint);
        try {
            var weights = engine.benchModel(model).orElseThrow(() -> new IllegalStateException(arch.name() + "'s engine has no bench model"));
            int[] prompt = randomPrompt(spec.seed(), model.vocabSize(), CONTEXTS[CONTEXTS.length - 1]);
            return new BenchSetup(model, engine, weights, checkpoint, prompt, repeats, decodeSteps, work, log);
        } catch (RuntimeException e) {
            model.close();
            throw e;
        }
    }

    /** A new conversation under the default engine options, with no probe. */
    ModelSession session() { return session(EngineOptions.defaults()); }

    /** A new conversation under these engine options, with no probe. */
    ModelSession session(EngineOptions options) { return engine.session(model, options, null); }

    @Override
    public void close() { model.close(); }

    /** Random token ids past the first three (pad, bos, eos), seeded: a longer prompt starts with a shorter one's tokens. */
    static int[] randomPrompt(long seed, int vocab, int length) {
        var rnd = new SplittableRandom(seed);
        int[] prompt = new int[length];
        for (int i = 0; i < prompt.length; i++) prompt[i] = 3 + rnd.nextInt(vocab - 3);
        return prompt;
    }

    int maxContext() { return prompt.length; }

    @Override public int[] prompt(int length) { return java.util.Arrays.copyOf(prompt, length); }

    /** Seconds since {@code t0}, a {@link System#nanoTime()} reading. */
    static double secondsSince(long t0) { return (System.nanoTime() - t0) / 1e9; }
}
