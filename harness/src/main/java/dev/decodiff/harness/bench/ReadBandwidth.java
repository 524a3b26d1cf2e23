package dev.decodiff.harness.bench;

import dev.decodiff.metal.NativeKernels;
import dev.decodiff.metal.Parallel;
import dev.decodiff.metal.StreamRead;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * What memory delivers to a reader that does nothing else: the whole mapped weights file (the pages decode reads)
 * read with the engine's thread count, each thread an equal share, started together, by the native prefetching
 * reader (what the native matvec does) and by the Java one; and the native reader over anonymous memory, the
 * machine's ceiling without the page cache. Passes of the three alternate so drift hits them alike. The yardstick
 * decode is measured against is the best pass of the prefetching reader over the file: a ceiling, not a typical
 * pass, so the ratio is not flattered by a slow one.
 *
 * @param nativeGbs null where the native kernels are not available (then the Java reader is the yardstick)
 */
record ReadBandwidth(Figure javaGbs, Figure nativeGbs, Figure anonymousGbs, long anonymousBytes) {
    /** Anonymous memory read: far past any cache, small beside the model. */
    static final long ANONYMOUS_BYTES = 512L << 20;

    static ReadBandwidth measure(BenchSetup b) throws IOException {
        int threads = Parallel.threads();
        boolean nat = NativeKernels.available();
        b.log().accept("read bandwidth (" + threads + " threads, equal shares; kernels: " + NativeKernels.status() + ")…");
        try (var arena = Arena.ofShared(); var ch = FileChannel.open(weights(b.checkpoint()), StandardOpenOption.READ)) {
            var file = ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size(), arena);
            var anon = arena.allocate(ANONYMOUS_BYTES, 2 << 20); // zero-filled: every page is touched before it is timed
            StreamRead.secondsEqualShares(file, threads, false); // page in
            StreamRead.secondsEqualShares(file, threads, true);
            StreamRead.secondsEqualShares(anon, threads, true);
            int passes = 2 * b.repeats() + 1;
            double[] sj = new double[passes], sn = new double[passes], sa = new double[passes];
            for (int i = 0; i < passes; i++) {
                sj[i] = StreamRead.secondsEqualShares(file, threads, false);
                if (!nat) continue;
                sn[i] = StreamRead.secondsEqualShares(file, threads, true);
                sa[i] = StreamRead.secondsEqualShares(anon, threads, true);
            }
            if (!nat) for (int i = 0; i < passes; i++) sa[i] = StreamRead.secondsEqualShares(anon, threads, false);
            double gb = readBytes(file) / 1e9;
            return new ReadBandwidth(Figure.rates(gb, sj), nat ? Figure.rates(gb, sn) : null, Figure.rates(readBytes(anon) / 1e9, sa), anon.byteSize());
        }
    }

    private static Path weights(Path checkpoint) { return checkpoint.resolve("model.safetensors"); }

    /** The bytes a pass reads: whole 256-byte blocks. */
    private static long readBytes(MemorySegment m) { return m.byteSize() / 256 * 256; }

    /** The prefetching reader's passes over the file (the Java reader's where there is no native one). */
    Figure file() { return nativeGbs != null ? nativeGbs : javaGbs; }

    /** The ceiling decode's weight traffic is measured against: the best pass over the file. */
    double bestGbs() { return file().max(); }
}
