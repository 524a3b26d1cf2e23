package dev.decodiff.harness.bench;

import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.InferenceSession;
import dev.decodiff.engine.Sampler;

/**
 * Prefill of {@link BenchSetup#PREFILL} tokens in fresh sessions, repeated; the last session, prefilled, goes on to
 * decode at that context.
 */
record Prefill(Figure tokensPerS, Primed last) {

    /** A session that has read its prompt, and the logits of the prompt's last position. */
    record Primed(InferenceSession session, float[] logits) {}

    /** The f32 prefill, after a warm-up that lets the JIT compile the prefill and decode paths. */
    static Prefill measure(BenchSetup b) {
        // Warm-up at full length (untimed): a short one leaves the GEMM's long-chunk paths and C2 compilation to the
        // first timed prefill.
        b.log().accept("warm-up…");
        var w = b.model().newSession();
        int next = Sampler.argmax(w.forward(b.prompt(BenchSetup.PREFILL)));
        for (int i = 0; i < 16; i++) next = Sampler.argmax(w.forward(new int[]{next}));
        b.log().accept("prefill " + BenchSetup.PREFILL + " tokens ×" + b.repeats() + "…");
        return timed(b, EngineOptions.defaults());
    }

    /** The prefill with these engine options, {@code repeats} times. */
    static Prefill timed(BenchSetup b, EngineOptions options) {
        var sec = new double[b.repeats()];
        Primed last = null;
        for (int i = 0; i < sec.length; i++) {
            var s = b.model().newSession(options);
            long t0 = System.nanoTime();
            float[] logits = s.forward(b.prompt(BenchSetup.PREFILL));
            sec[i] = BenchSetup.secondsSince(t0);
            last = new Primed(s, logits);
        }
        return new Prefill(Figure.rates(BenchSetup.PREFILL, sec), last);
    }
}
