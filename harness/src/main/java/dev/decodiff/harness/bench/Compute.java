package dev.decodiff.harness.bench;

import dev.decodiff.harness.report.Fmt;
import dev.decodiff.metal.FmaPeak;
import dev.decodiff.metal.Parallel;
import dev.decodiff.metal.WeightMatrix;

import java.util.SplittableRandom;

/**
 * The compute ceiling and what prefill's matrix products reach against it: the machine's fp32 FMA peak (an
 * in-register FMA loop on every thread) and the GFLOPS of the engine's GEMM on a real prefill shape (the first
 * layer's FFN gate, {@link BenchSetup#PREFILL} tokens), each the best of several passes.
 */
record Compute(Figure fmaPeakGflops, Figure gemmGflops, String gemmShape) {
    /** FMA rounds per thread per pass: a few hundred ms on a current core. */
    private static final long FMA_ITERATIONS = 40_000_000L;

    static Compute measure(BenchSetup b) {
        int threads = Parallel.threads();
        b.log().accept("fp32 FMA peak (" + threads + " threads) and prefill GEMM…");
        FmaPeak.gflops(threads, FMA_ITERATIONS / 8); // compile the loop before it is timed
        FmaPeak.gflops(threads, FMA_ITERATIONS / 8);
        WeightMatrix w = b.model().weights().layers().getFirst().gate();
        int T = BenchSetup.PREFILL;
        float[] x = new float[T * w.cols()], y = new float[T * w.rows()];
        var rnd = new SplittableRandom(b.prompt()[0]);
        for (int i = 0; i < x.length; i++) x[i] = (float) rnd.nextGaussian();
        double flop = 2.0 * T * w.rows() * w.cols();
        w.matmul(x, T, y); // warm
        // Passes of the two alternate, so drift over the run (other tenants, clocks) hits the ceiling and the GEMM alike.
        int passes = 2 * b.repeats() + 1;
        double[] peak = new double[passes], gemm = new double[passes];
        for (int i = 0; i < passes; i++) {
            peak[i] = FmaPeak.gflops(threads, FMA_ITERATIONS);
            long t0 = System.nanoTime();
            w.matmul(x, T, y);
            gemm[i] = flop / BenchSetup.secondsSince(t0) / 1e9;
        }
        return new Compute(Figure.of(peak), Figure.of(gemm), Fmt.format("%d×%d · %d×%d", T, w.cols(), w.cols(), w.rows()));
    }

    /** The GEMM's best pass over the FMA peak's best. */
    double gemmOverPeak() { return gemmGflops.max() / fmaPeakGflops.max(); }
}
