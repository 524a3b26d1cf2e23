package dev.decodiff.harness.bench;

import dev.decodiff.engine.EngineOptions;

/**
 * Time to first token when a request shares a stored {@link BenchSetup#PREFIX}-token prefix: resumed from the
 * snapshot through the engine's own prefix cache, and as the second turn of a kept session (the new tokens only).
 */
record PrefixReuse(Figure secondTurnS, Figure prefixReusedS) {

    static PrefixReuse measure(BenchSetup b) {
        b.log().accept("TTFT: " + BenchSetup.PREFIX + "-token prefix snapshot reused, second turn…");
        var stored = b.engine().storedPrefix(b.model(), EngineOptions.defaults(), b.prompt(BenchSetup.PREFIX))
                .orElseThrow(() -> new IllegalStateException("the bench's engine has no prefix cache"));
        var kept = stored.session();
        int[] turn = java.util.Arrays.copyOfRange(b.prompt(), BenchSetup.PREFIX, b.maxContext());
        double[] turnS = new double[b.repeats()];
        for (int i = 0; i < turnS.length; i++) {
            if (i > 0) stored.rewind(); // back to the end of the first turn, untimed
            long t0 = System.nanoTime();
            kept.forward(turn);
            turnS[i] = BenchSetup.secondsSince(t0);
        }
        double[] prefixS = new double[b.repeats()];
        for (int i = 0; i < prefixS.length; i++) {
            long t0 = System.nanoTime();
            int reused = stored.resume(b.prompt());
            prefixS[i] = BenchSetup.secondsSince(t0);
            if (reused != BenchSetup.PREFIX)
                throw new IllegalStateException("prefix cache reused " + reused + " tokens, expected " + BenchSetup.PREFIX);
        }
        return new PrefixReuse(Figure.of(turnS), Figure.of(prefixS));
    }
}
