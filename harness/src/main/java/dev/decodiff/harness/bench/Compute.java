package dev.decodiff.harness.bench;

import dev.decodiff.harness.report.Fmt;
import dev.decodiff.metal.AmxPeak;
import dev.decodiff.metal.FmaPeak;
import dev.decodiff.metal.MatmulPrecision;
import dev.decodiff.metal.Parallel;
import dev.decodiff.metal.WeightMatrix;

import java.util.SplittableRandom;

/**
 * The compute ceilings and what prefill's matrix products reach against them: the machine's fp32 FMA peak (an
 * in-register FMA loop on every thread) and, where the CPU has AMX tiles, its AMX bf16 peak (an in-register tile loop);
 * the GFLOPS of the exact GEMM on fused multiply-adds, of the exact GEMM on AMX tiles (activations split into three
 * bf16 terms: three tile products per useful one) and of the --matmul bf16 GEMM on AMX tiles, on a real prefill shape
 * (the bench model's {@code prefillGemmMatrix}, Gemma 4's first FFN gate; {@link BenchSetup#PREFILL} tokens). Every
 * pass measures each of them once, in turn, so drift over the run (other tenants, clocks) hits ceilings and GEMMs
 * alike; each figure is over the passes.
 *
 * @param amxPeakGflops null (and the AMX figures after it too) where AMX tiles are not in use
 * @param amxOverFmaPerPass each pass's exact AMX GEMM over the same pass's FMA GEMM
 * @param amxBf16OverFmaPerPass each pass's --matmul bf16 AMX GEMM over the same pass's exact FMA GEMM
 */
record Compute(Figure fmaPeakGflops, Figure gemmGflops, String gemmShape, Figure amxPeakGflops, Figure amxGemmGflops, Figure amxBf16GemmGflops,
               Figure amxOverFmaPerPass, Figure amxBf16OverFmaPerPass) {
    /** FMA rounds per thread per pass: a few hundred ms on a current core. */
    private static final long FMA_ITERATIONS = 40_000_000L;
    /** Tile rounds per thread per pass (four tile products each): about 0.2 s at 3 TFLOPS per core. */
    private static final long AMX_ITERATIONS = 8_000_000L;

    static Compute measure(BenchSetup b) {
        int threads = Parallel.threads();
        boolean amx = AmxPeak.available();
        b.log().accept("fp32 FMA peak" + (amx ? ", AMX bf16 peak" : "") + " (" + threads + " threads) and prefill GEMMs…");
        FmaPeak.gflops(threads, FMA_ITERATIONS / 8); // compile the loop before it is timed
        FmaPeak.gflops(threads, FMA_ITERATIONS / 8);
        WeightMatrix w = b.weights().prefillGemmMatrix().orElseThrow(() -> new IllegalStateException("the bench model offers no prefill GEMM's matrix"));
        int T = BenchSetup.PREFILL;
        float[] x = new float[T * w.cols()], y = new float[T * w.rows()];
        var rnd = new SplittableRandom(b.prompt()[0]);
        for (int i = 0; i < x.length; i++) x[i] = (float) rnd.nextGaussian();
        double flop = 2.0 * T * w.rows() * w.cols();
        w.matmulFma(x, T, y); // warm
        if (amx) {
            AmxPeak.gflops(threads, AMX_ITERATIONS / 8);
            w.matmulAmx(x, T, y);
            w.matmul(x, T, y, MatmulPrecision.BF16);
        }
        int passes = 2 * b.repeats() + 1;
        double[] peak = new double[passes], gemm = new double[passes], amxPeak = new double[passes], amxGemm = new double[passes], amxBf16 = new double[passes];
        for (int i = 0; i < passes; i++) {
            peak[i] = FmaPeak.gflops(threads, FMA_ITERATIONS);
            long t0 = System.nanoTime();
            w.matmulFma(x, T, y);
            gemm[i] = flop / BenchSetup.secondsSince(t0) / 1e9;
            if (!amx) continue;
            amxPeak[i] = AmxPeak.gflops(threads, AMX_ITERATIONS);
            t0 = System.nanoTime();
            w.matmulAmx(x, T, y);
            amxGemm[i] = flop / BenchSetup.secondsSince(t0) / 1e9;
            t0 = System.nanoTime();
            w.matmul(x, T, y, MatmulPrecision.BF16);
            amxBf16[i] = flop / BenchSetup.secondsSince(t0) / 1e9;
        }
        double[] exactRatio = new double[passes], bf16Ratio = new double[passes];
        for (int i = 0; i < passes; i++) {
            exactRatio[i] = amxGemm[i] / gemm[i];
            bf16Ratio[i] = amxBf16[i] / gemm[i];
        }
        return new Compute(Figure.of(peak), Figure.of(gemm), Fmt.format("%d×%d · %d×%d", T, w.cols(), w.cols(), w.rows()),
                amx ? Figure.of(amxPeak) : null, amx ? Figure.of(amxGemm) : null, amx ? Figure.of(amxBf16) : null,
                amx ? Figure.of(exactRatio) : null, amx ? Figure.of(bf16Ratio) : null);
    }

    /** The FMA GEMM's best pass over the FMA peak's best. */
    double gemmOverPeak() { return gemmGflops.max() / fmaPeakGflops.max(); }

    /** The median over the passes of the exact AMX GEMM over the exact FMA GEMM of the same pass; NaN without AMX. */
    double amxOverFmaGemm() { return amxOverFmaPerPass == null ? Double.NaN : amxOverFmaPerPass.median(); }

    /** The same for the --matmul bf16 AMX GEMM over the exact FMA GEMM; NaN without AMX. */
    double amxBf16OverFmaGemm() { return amxBf16OverFmaPerPass == null ? Double.NaN : amxBf16OverFmaPerPass.median(); }

    /** The exact AMX GEMM's tile products (three per useful product) over the AMX peak, best passes; NaN without AMX. */
    double amxTileUse() { return amxGemmGflops == null ? Double.NaN : 3 * amxGemmGflops.max() / amxPeakGflops.max(); }
}
