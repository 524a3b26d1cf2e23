package dev.decodiff.harness.bench;

import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.engine.arch.Gemma4Architecture;
import dev.decodiff.engine.arch.LoadedModel;
import dev.decodiff.harness.arch.ArchitectureSupports;
import dev.decodiff.harness.arch.TunableEngine;

import java.nio.file.Path;
import java.util.SplittableRandom;
import java.util.function.Consumer;

/**
 * What every measured phase of a bench run shares: the loaded bench model, its checkpoint folder, a prompt of random
 * token ids long enough for the longest context, the repeat counts, a scratch folder and the progress log.
 */
record BenchSetup(Gemma4Model model, Path checkpoint, int[] prompt, int repeats, int decodeSteps, Path work, Consumer<String> log)
        implements AutoCloseable {
    static final int[] CONTEXTS = {128, 512, 2048};
    static final int PREFILL = 512;
    /** The shared prefix of a stored snapshot, and the new tokens a request or turn adds to it. */
    static final int PREFIX = 2000;

    /** The bench checkpoint loaded for any length (the bench's model is closed with the setup). */
    static BenchSetup load(BenchSpec spec, Path checkpoint, int repeats, int decodeSteps, Path work, Consumer<String> log) {
        var model = Gemma4Model.load(checkpoint);
        int[] prompt = randomPrompt(spec.seed(), model.config().vocabSize(), CONTEXTS[CONTEXTS.length - 1]);
        return new BenchSetup(model, checkpoint, prompt, repeats, decodeSteps, work, log);
    }

    /** The bench model seen through the plug-in seam, for the phases that need no more than it offers. */
    LoadedModel loaded() { return Gemma4Architecture.INSTANCE.wrap(model); }

    /** The engine that runs the bench model under any engine options (its family's tunable engine). */
    TunableEngine engine() { return ArchitectureSupports.of(loaded().architecture()).tunableEngine().orElseThrow(); }

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

    int[] prompt(int length) { return java.util.Arrays.copyOf(prompt, length); }

    /** Seconds since {@code t0}, a {@link System#nanoTime()} reading. */
    static double secondsSince(long t0) { return (System.nanoTime() - t0) / 1e9; }
}
