package dev.decodiff.harness.bench;

import dev.decodiff.metal.NativeKernels;
import dev.decodiff.metal.Parallel;
import dev.decodiff.metal.StreamRead;

import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.metal.WeightMatrix;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/**
 * What memory delivers to a reader that does nothing else: the weight matrices decode streams, in the mapped weights
 * file (the same pages; not a lookup table such as PLE's, whose pages a decode step barely touches, nor anything a
 * busy machine has let fall out of the page cache), read with the engine's thread count, each thread an equal share, started together, by the native prefetching
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
        try (var arena = Arena.ofShared()) {
            var file = streamed(b.model());
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
            long bytes = 0;
            for (var m : file) bytes += readBytes(m);
            double gb = bytes / 1e9;
            return new ReadBandwidth(Figure.rates(gb, sj), nat ? Figure.rates(gb, sn) : null, Figure.rates(readBytes(anon) / 1e9, sa), anon.byteSize());
        }
    }

    /**
     * The matrices a decode step streams, as the engine maps them: the head, every layer's projections and MLP, the
     * per-layer-input projections, and the MoE router and experts (all of them: which ones a token reads varies).
     */
    private static List<MemorySegment> streamed(Gemma4Model model) {
        var w = model.weights();
        var out = new ArrayList<MemorySegment>();
        out.add(w.lmHead().data());
        if (w.pleModelProjection() != null) out.add(w.pleModelProjection().data());
        for (var l : w.layers()) {
            for (var m : new WeightMatrix[]{l.q(), l.k(), l.v(), l.o(), l.gate(), l.up(), l.down(), l.pleGate(), l.pleProjection()})
                if (m != null) out.add(m.data());
            if (l.moe() != null) {
                out.add(l.moe().router().data());
                for (var m : l.moe().gateUp()) out.add(m.data());
                for (var m : l.moe().down()) out.add(m.data());
            }
        }
        return out;
    }

    /** The bytes a pass reads: whole 256-byte blocks. */
    private static long readBytes(MemorySegment m) { return m.byteSize() / 256 * 256; }

    /** The prefetching reader's passes over the streamed weights (the Java reader's where there is no native one). */
    Figure file() { return nativeGbs != null ? nativeGbs : javaGbs; }

    /** The ceiling decode's weight traffic is measured against: the best pass over the file. */
    double bestGbs() { return file().max(); }
}
