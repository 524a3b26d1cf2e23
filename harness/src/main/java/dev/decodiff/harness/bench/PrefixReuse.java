package dev.decodiff.harness.bench;

import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.PrefixCache;

/**
 * Time to first token when a request shares a stored {@link BenchSetup#PREFIX}-token prefix: resumed from the
 * snapshot through a {@link PrefixCache}, and as the second turn of a kept session (the new tokens only).
 */
record PrefixReuse(Figure secondTurnS, Figure prefixReusedS) {

    static PrefixReuse measure(BenchSetup b) {
        b.log().accept("TTFT: " + BenchSetup.PREFIX + "-token prefix snapshot reused, second turn…");
        var kept = b.model().newSession();
        kept.forward(b.prompt(BenchSetup.PREFIX));
        var snap = kept.snapshot();
        int[] turn = java.util.Arrays.copyOfRange(b.prompt(), BenchSetup.PREFIX, b.maxContext());
        double[] turnS = new double[b.repeats()];
        for (int i = 0; i < turnS.length; i++) {
            if (i > 0) kept.restore(snap); // back to the end of the first turn, untimed
            long t0 = System.nanoTime();
            kept.forward(turn);
            turnS[i] = BenchSetup.secondsSince(t0);
        }
        var prefixCache = new PrefixCache();
        prefixCache.store(snap);
        double[] prefixS = new double[b.repeats()];
        for (int i = 0; i < prefixS.length; i++) {
            long t0 = System.nanoTime();
            var r = prefixCache.resume(b.model(), EngineOptions.defaults(), b.prompt());
            prefixS[i] = BenchSetup.secondsSince(t0);
            if (r.reusedTokens() != BenchSetup.PREFIX)
                throw new IllegalStateException("prefix cache reused " + r.reusedTokens() + " tokens, expected " + BenchSetup.PREFIX);
        }
        return new PrefixReuse(Figure.of(turnS), Figure.of(prefixS));
    }
}
