package dev.decodiff.metal;

import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A streaming read of memory with the same threads and split as the kernels ({@link Parallel}): the yardstick
 * that decode's weight traffic is measured against. It does the least work a read can (integer adds into four
 * independent vector accumulators), so it is bound by memory, not by the core.
 */
public final class StreamRead {
    private static final VectorSpecies<Integer> I = IntVector.SPECIES_512;
    private static final int BLOCK = 4 * 64;
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    private StreamRead() {}

    /** Reads every byte of {@code data} (rounded down to 256-byte blocks) once; returns a checksum so nothing is elided. */
    public static long read(MemorySegment data) {
        return read(data, false);
    }

    /**
     * As {@link #read(MemorySegment)}, with the native prefetching reader of {@link NativeKernels} when {@code useNative}
     * and it is available (the native matvec prefetches; its yardstick should too).
     */
    public static long read(MemorySegment data, boolean useNative) {
        boolean nat = useNative && NativeKernels.available();
        long blocks = data.byteSize() / BLOCK;
        // Parallel splits an int range: cut the segment into at most 2^20 pieces of whole blocks.
        int pieces = (int) Math.min(blocks, 1 << 20);
        if (pieces == 0) return 0;
        long perPiece = blocks / pieces;
        var sum = new AtomicLong();
        Parallel.forRange(pieces, 1, (from, to) -> {
            long start = from * perPiece * BLOCK;
            long end = to == pieces ? blocks * BLOCK : to * perPiece * BLOCK;
            sum.addAndGet(nat ? NativeKernels.streamRead(data.asSlice(start, end - start), end - start) : readRange(data, start, end));
        });
        return sum.get();
    }

    /**
     * Seconds to read every byte of {@code data} (rounded down to 256-byte blocks) once with {@code threads} threads,
     * each an equal contiguous share, started together; the native prefetching reader where {@code useNative} and it
     * is available.
     */
    public static double secondsEqualShares(MemorySegment data, int threads, boolean useNative) {
        boolean nat = useNative && NativeKernels.available();
        long bytes = data.byteSize();
        return EqualShares.seconds(threads, i -> {
            long start = shareStart(bytes, threads, i), end = shareStart(bytes, threads, i + 1);
            return nat ? NativeKernels.streamRead(data.asSlice(start, end - start), end - start) : readRange(data, start, end);
        });
    }

    /**
     * As {@link #secondsEqualShares(MemorySegment, int, boolean)} over several segments read as one run of bytes (each
     * rounded down to whole 256-byte blocks): thread i reads the i-th equal share of the concatenation, crossing from one
     * segment into the next, so the shares stay equal however the bytes are split into segments.
     */
    public static double secondsEqualShares(java.util.List<MemorySegment> parts, int threads, boolean useNative) {
        boolean nat = useNative && NativeKernels.available();
        long[] ends = blockEnds(parts);
        long bytes = ends.length == 0 ? 0 : ends[ends.length - 1];
        return EqualShares.seconds(threads, i -> readShare(parts, ends, shareStart(bytes, threads, i), shareStart(bytes, threads, i + 1), nat));
    }

    /** Where each part ends in the run of their whole 256-byte blocks. */
    static long[] blockEnds(java.util.List<MemorySegment> parts) {
        long[] ends = new long[parts.size()];
        long total = 0;
        for (int k = 0; k < ends.length; k++) ends[k] = total += parts.get(k).byteSize() / BLOCK * BLOCK;
        return ends;
    }

    /** Reads bytes [from, to) of the run of the parts' whole blocks, crossing from one part into the next. */
    static long readShare(java.util.List<MemorySegment> parts, long[] ends, long from, long to, boolean nat) {
        long sum = 0;
        for (int k = 0; k < ends.length && from < to; k++) {
            long begin = k == 0 ? 0 : ends[k - 1];
            if (ends[k] <= from) continue;
            long a = from - begin, b = Math.min(to, ends[k]) - begin;
            var seg = parts.get(k);
            sum += nat ? NativeKernels.streamRead(seg.asSlice(a, b - a), b - a) : readRange(seg, a, b);
            from = begin + b;
        }
        return sum;
    }

    /** Where share i of n begins: the whole 256-byte blocks of {@code bytes} cut into n runs that differ by at most a block. */
    static long shareStart(long bytes, int n, int i) { return bytes / BLOCK * i / n * BLOCK; }

    private static long readRange(MemorySegment data, long start, long end) {
        var a0 = IntVector.zero(I);
        var a1 = a0;
        var a2 = a0;
        var a3 = a0;
        for (long o = start; o < end; o += BLOCK) {
            a0 = a0.add(IntVector.fromMemorySegment(I, data, o, LE));
            a1 = a1.add(IntVector.fromMemorySegment(I, data, o + 64, LE));
            a2 = a2.add(IntVector.fromMemorySegment(I, data, o + 128, LE));
            a3 = a3.add(IntVector.fromMemorySegment(I, data, o + 192, LE));
        }
        return a0.add(a1).add(a2).add(a3).reduceLanes(VectorOperators.ADD);
    }
}
