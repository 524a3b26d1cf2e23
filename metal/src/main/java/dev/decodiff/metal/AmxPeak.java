package dev.decodiff.metal;

/**
 * The machine's AMX bf16 peak: every thread runs tile products (TDPBF16PS) on four independent 16 × 16 fp32
 * accumulator tiles from operand tiles held in tile registers, no memory traffic (decodiff_amx_loop). The ceiling the
 * AMX GEMMs' GFLOPS are measured against, beside {@link FmaPeak} for the FMA ones.
 */
public final class AmxPeak {
    /** Flops of one iteration of the loop: four tile products of 16 × 32 × 16 multiply-adds. */
    private static final double FLOPS_PER_ITERATION = 4.0 * 16 * 16 * 32 * 2;

    private AmxPeak() {}

    /** Whether the tiles are in use here ({@link NativeKernels#amxAvailable()}). */
    public static boolean available() { return NativeKernels.amxAvailable(); }

    /** GFLOPS of {@code iterations} tile rounds on each of {@code threads} threads, started together. */
    public static double gflops(int threads, long iterations) {
        double s = EqualShares.seconds(threads, i -> Float.floatToRawIntBits(NativeKernels.amxLoop(iterations)));
        return FLOPS_PER_ITERATION * iterations * threads / s / 1e9;
    }
}
