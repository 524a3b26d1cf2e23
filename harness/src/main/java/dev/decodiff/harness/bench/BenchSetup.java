package dev.decodiff.harness.bench;

import dev.decodiff.engine.Gemma4Model;

import java.nio.file.Path;
import java.util.SplittableRandom;
import java.util.function.Consumer;

/**
 * What every measured phase of a bench run shares: the loaded bench model, its checkpoint folder, a prompt of random
 * token ids long enough for the longest context, the repeat counts, a scratch folder and the progress log.
 */
record BenchSetup(Gemma4Model model, Path checkpoint, int[] prompt, int repeats, int decodeSteps, Path work, Consumer<String> log) {
    static final int[] CONTEXTS = {128, 512, 2048};
    static final int PREFILL = 512;
    /** The shared prefix of a stored snapshot, and the new tokens a request or turn adds to it. */
    static final int PREFIX = 2000;

    static BenchSetup of(BenchSpec spec, Gemma4Model model, Path checkpoint, int repeats, int decodeSteps, Path work, Consumer<String> log) {
        int[] prompt = randomPrompt(spec.seed(), model.config().vocabSize(), CONTEXTS[CONTEXTS.length - 1]);
        return new BenchSetup(model, checkpoint, prompt, repeats, decodeSteps, work, log);
    }

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
