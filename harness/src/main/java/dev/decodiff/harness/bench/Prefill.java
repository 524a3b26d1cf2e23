package dev.decodiff.harness.bench;

import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.Sampler;
import dev.decodiff.engine.arch.ModelSession;
import dev.decodiff.metal.MatmulPrecision;
import dev.decodiff.metal.NativeKernels;

/**
 * Prefill of {@link BenchSetup#PREFILL} tokens in fresh sessions, repeated; the last session, prefilled, goes on to
 * decode at that context. Where AMX tiles run the exact prefill, {@code fmaTokensPerS} is the same prefill on the FMA
 * kernels ({@code --matmul fp32-fma}) in the same rounds and {@code amxOverFmaPerRound} each round's speed-up; null
 * elsewhere.
 */
record Prefill(Figure tokensPerS, Primed last, Figure fmaTokensPerS, Figure amxOverFmaPerRound) {

    /** A session that has read its prompt, and the logits of the prompt's last position. */
    record Primed(ModelSession session, float[] logits) {}

    /** The f32 prefill, after a warm-up that lets the JIT compile the prefill and decode paths. */
    static Prefill measure(BenchSetup b) {
        // Warm-up at full length (untimed): a short one leaves the GEMM's long-chunk paths and C2 compilation to the
        // first timed prefill.
        b.log().accept("warm-up…");
        var w = b.session();
        int next = Sampler.argmax(w.forward(b.prompt(BenchSetup.PREFILL)));
        for (int i = 0; i < 16; i++) next = Sampler.argmax(w.forward(new int[]{next}));
        if (!NativeKernels.amxAvailable()) {
            b.log().accept("prefill " + BenchSetup.PREFILL + " tokens ×" + b.repeats() + "…");
            return timed(b, EngineOptions.defaults());
        }
        // Where the exact prefill runs on AMX tiles, the same prefill on the FMA kernels in the same rounds, the two in
        // turn (which goes first alternates), so that the ratio compares the same moments.
        b.log().accept("prefill " + BenchSetup.PREFILL + " tokens ×" + b.repeats() + ", AMX and FMA GEMMs in turn…");
        var fma = EngineOptions.defaults().withMatmul(MatmulPrecision.FP32_FMA);
        b.session(fma).forward(b.prompt(BenchSetup.PREFILL)); // warm-up of the FMA GEMM's paths, untimed
        var amxSec = new double[b.repeats()];
        var fmaSec = new double[b.repeats()];
        Primed last = null;
        for (int i = 0; i < b.repeats(); i++) {
            for (int k = 0; k < 2; k++) {
                boolean amx = (i + k) % 2 == 0;
                var s = b.session(amx ? EngineOptions.defaults() : fma);
                long t0 = System.nanoTime();
                float[] logits = s.forward(b.prompt(BenchSetup.PREFILL));
                (amx ? amxSec : fmaSec)[i] = BenchSetup.secondsSince(t0);
                if (amx) last = new Primed(s, logits);
            }
        }
        var ratio = new double[b.repeats()];
        for (int i = 0; i < ratio.length; i++) ratio[i] = fmaSec[i] / amxSec[i];
        return new Prefill(Figure.rates(BenchSetup.PREFILL, amxSec), last, Figure.rates(BenchSetup.PREFILL, fmaSec), Figure.of(ratio));
    }

    /** The prefill with these engine options, {@code repeats} times. */
    static Prefill timed(BenchSetup b, EngineOptions options) {
        var sec = new double[b.repeats()];
        Primed last = null;
        for (int i = 0; i < sec.length; i++) {
            var s = b.session(options);
            long t0 = System.nanoTime();
            float[] logits = s.forward(b.prompt(BenchSetup.PREFILL));
            sec[i] = BenchSetup.secondsSince(t0);
            last = new Primed(s, logits);
        }
        return new Prefill(Figure.rates(BenchSetup.PREFILL, sec), last, null, null);
    }
}
