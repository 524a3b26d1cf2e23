package dev.decodiff.harness.bench;

import dev.decodiff.metal.NativeKernels;
import dev.decodiff.metal.Parallel;
import dev.decodiff.metal.StreamRead;
import dev.decodiff.metal.HugePageMemory;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;

/**
 * What memory delivers to a reader that does nothing else, read with the engine's thread count, each thread an equal
 * share, started together, by the native prefetching reader (what the native matvec does) and by the Java one: the
 * weight matrices decode streams where the engine reads them (a copy on huge pages, or the mapped file; not a lookup
 * table such as PLE's, whose pages a decode step barely touches), the same matrices in the mapped file when the
 * engine reads a copy, and anonymous memory on huge pages (the machine's ceiling without the page cache or 4 KB pages).
 * Passes alternate so drift hits them alike. The ceiling decode is measured against is the best single pass of any of
 * the native readers: the most this machine delivered to a reader, so the ratio is not flattered by a slow pass or a
 * slow kind of memory.
 *
 * @param nativeGbs null where the native kernels are not available (then the Java reader is the yardstick)
 * @param mappedGbs the native reader over the mapped file; null where the engine reads the mapped file itself (then
 *                  {@code nativeGbs} is that) or there is no native reader
 */
record ReadBandwidth(Figure javaGbs, Figure nativeGbs, Figure mappedGbs, Figure anonymousGbs, long anonymousBytes,
                     boolean anonymousHugePages, String placement) {
    /** Anonymous memory read: far past any cache, small beside the model. */
    static final long ANONYMOUS_BYTES = 512L << 20;

    static ReadBandwidth measure(BenchSetup b) throws IOException {
        int threads = Parallel.threads();
        boolean nat = NativeKernels.available();
        b.log().accept("read bandwidth (" + threads + " threads, equal shares; kernels: " + NativeKernels.status() + ")…");
        var weights = b.weights();
        var placed = weights.streamedWeights();
        var mapped = nat ? weights.mappedStreamedWeights().orElse(null) : null;
        try (var arena = Arena.ofShared()) {
            boolean huge = HugePageMemory.available();
            // Zero-filled either way: every page is touched before it is timed.
            var anon = huge ? HugePageMemory.allocate(ANONYMOUS_BYTES, arena).fill((byte) 0) : arena.allocate(ANONYMOUS_BYTES, 2 << 20);
            StreamRead.secondsEqualShares(placed, threads, false); // page in
            StreamRead.secondsEqualShares(placed, threads, true);
            if (mapped != null) {
                StreamRead.secondsEqualShares(mapped, threads, true);
                unload(mapped);
            }
            StreamRead.secondsEqualShares(anon, threads, true);
            int passes = 2 * b.repeats() + 1;
            double[] sj = new double[passes], sn = new double[passes], sm = new double[passes], sa = new double[passes];
            for (int i = 0; i < passes; i++) {
                sj[i] = StreamRead.secondsEqualShares(placed, threads, false);
                if (!nat) continue;
                sn[i] = StreamRead.secondsEqualShares(placed, threads, true);
                if (mapped != null) {
                    sm[i] = StreamRead.secondsEqualShares(mapped, threads, true);
                    unload(mapped); // the file's pages leave this process (not the page cache): RSS is the engine's again
                }
                sa[i] = StreamRead.secondsEqualShares(anon, threads, true);
            }
            if (!nat) for (int i = 0; i < passes; i++) sa[i] = StreamRead.secondsEqualShares(anon, threads, false);
            double gb = gigabytes(placed);
            return new ReadBandwidth(Figure.rates(gb, sj), nat ? Figure.rates(gb, sn) : null, mapped != null ? Figure.rates(gb, sm) : null,
                    Figure.rates(readBytes(anon) / 1e9, sa), anon.byteSize(), huge, weights.weightPlacement());
        }
    }

    /**
     * The matrices a decode step streams: the head, every layer's projections and MLP, the per-layer-input
     * projections, and the MoE router and experts (all of them: which ones a token reads varies).
     */
    /**
     * One pass of the native prefetching reader over the streamed weights where the engine reads them, in GB/s, or null
     * where there is no native reader.
     */
    static java.util.function.DoubleSupplier nativeReader(BenchSetup b) { return nativeReader(b.weights().streamedWeights()); }

    /** The same over these segments (a model's streamed weights). */
    static java.util.function.DoubleSupplier nativeReader(List<MemorySegment> placed) {
        if (!NativeKernels.available()) return null;
        double gb = gigabytes(placed);
        return () -> gb / StreamRead.secondsEqualShares(placed, Parallel.threads(), true);
    }

    private static void unload(List<MemorySegment> mapped) {
        for (var m : mapped) if (m.isMapped()) m.unload();
    }

    /** What one pass over {@code segments} reads, in GB. */
    private static double gigabytes(List<MemorySegment> segments) {
        long bytes = 0;
        for (var m : segments) bytes += readBytes(m);
        return bytes / 1e9;
    }

    /** The bytes a pass reads: whole 256-byte blocks. */
    private static long readBytes(MemorySegment m) { return m.byteSize() / 256 * 256; }

    /** The prefetching reader's passes over the streamed weights where the engine reads them (the Java reader's where there is no native one). */
    Figure file() { return nativeGbs != null ? nativeGbs : javaGbs; }

    /** The best pass over the streamed weights where the engine reads them. */
    double weightsBestGbs() { return file().max(); }

    /** The ceiling decode's weight traffic is measured against: the best pass of any reader over any of the memories. */
    double bestGbs() {
        double best = Math.max(file().max(), anonymousGbs.max());
        return mappedGbs != null ? Math.max(best, mappedGbs.max()) : best;
    }
}
