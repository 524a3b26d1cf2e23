package dev.decodiff.metal;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * The machine's fp32 FMA peak: every thread runs fused multiply-adds on twelve independent vector accumulators held
 * in registers (enough chains to cover the FMA latency on two pipes), no memory traffic. The ceiling a GEMM's
 * GFLOPS are measured against.
 */
public final class FmaPeak {
    private static final VectorSpecies<Float> F = FloatVector.SPECIES_PREFERRED;
    private static final int CHAINS = 12;

    private FmaPeak() {}

    /** Flops of one {@link #run} of {@code iterations} on one thread. */
    public static double flops(long iterations) { return 2.0 * F.length() * CHAINS * iterations; }

    /** GFLOPS of {@code iterations} FMA rounds on each of {@code threads} threads, started together. */
    public static double gflops(int threads, long iterations) {
        double s = EqualShares.seconds(threads, i -> run(iterations, i));
        return flops(iterations) * threads / s / 1e9;
    }

    /** The FMA loop; returns a bit of its result so it is not elided. */
    static long run(long iterations, int seed) {
        var m = FloatVector.broadcast(F, 0.999999f);
        var c = FloatVector.broadcast(F, 1e-7f);
        var a0 = FloatVector.broadcast(F, seed + 1f);
        FloatVector a1 = a0.add(1f), a2 = a0.add(2f), a3 = a0.add(3f), a4 = a0.add(4f), a5 = a0.add(5f),
                a6 = a0.add(6f), a7 = a0.add(7f), a8 = a0.add(8f), a9 = a0.add(9f), a10 = a0.add(10f), a11 = a0.add(11f);
        for (long k = 0; k < iterations; k++) {
            a0 = a0.fma(m, c); a1 = a1.fma(m, c); a2 = a2.fma(m, c); a3 = a3.fma(m, c);
            a4 = a4.fma(m, c); a5 = a5.fma(m, c); a6 = a6.fma(m, c); a7 = a7.fma(m, c);
            a8 = a8.fma(m, c); a9 = a9.fma(m, c); a10 = a10.fma(m, c); a11 = a11.fma(m, c);
        }
        var s = a0.add(a1).add(a2).add(a3).add(a4).add(a5).add(a6).add(a7).add(a8).add(a9).add(a10).add(a11);
        return Float.floatToRawIntBits(s.lane(0));
    }
}
