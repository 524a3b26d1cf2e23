package dev.decodiff.metal;

import org.junit.jupiter.api.Test;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicIntegerArray;

import static org.assertj.core.api.Assertions.assertThat;

class EqualSharesTest {
    @Test
    void everyShareRunsExactlyOnceOnAThreadOfItsOwn() {
        int n = 3;
        var runs = new AtomicIntegerArray(n);
        Set<Thread> threads = ConcurrentHashMap.newKeySet();
        double s = EqualShares.seconds(n, i -> {
            runs.incrementAndGet(i);
            threads.add(Thread.currentThread());
            return i;
        });
        for (int i = 0; i < n; i++) assertThat(runs.get(i)).as("share %d", i).isEqualTo(1);
        assertThat(threads).hasSize(n).doesNotContain(Thread.currentThread());
        assertThat(s).isFinite().isNotNegative();
    }

    @Test
    void theReadersSharesTileEveryWholeBlockAndDifferByAtMostOneBlock() {
        for (long bytes : new long[]{0, 255, 256, 1000 * 256 + 100, 2_117_000_003L})
            for (int n : new int[]{1, 2, 3, 7, 16}) {
                long blocks = bytes / 256, min = Long.MAX_VALUE, max = 0;
                assertThat(StreamRead.shareStart(bytes, n, 0)).isZero();
                for (int i = 0; i < n; i++) {
                    long len = StreamRead.shareStart(bytes, n, i + 1) - StreamRead.shareStart(bytes, n, i);
                    assertThat(len % 256).isZero();
                    min = Math.min(min, len);
                    max = Math.max(max, len);
                }
                assertThat(StreamRead.shareStart(bytes, n, n)).as("%d bytes, %d shares", bytes, n).isEqualTo(blocks * 256);
                assertThat(max - min).as("%d bytes, %d shares", bytes, n).isLessThanOrEqualTo(256);
            }
    }

    @Test
    void sharesOfSeveralSegmentsReadEveryWholeBlockOfEachExactlyOnce() {
        // ints of 1 in parts of uneven sizes (tails shorter than a block are not read): the sum of the ints the shares
        // read is the number of ints in the parts' whole blocks, whatever the share count
        try (var arena = java.lang.foreign.Arena.ofConfined()) {
            var parts = new java.util.ArrayList<java.lang.foreign.MemorySegment>();
            long ints = 0;
            for (long size : new long[]{256 * 3 + 100, 256, 40, 256 * 17, 256 * 5 + 255}) {
                var seg = arena.allocate(size, 64);
                for (long o = 0; o + 4 <= size; o += 4) seg.set(java.lang.foreign.ValueLayout.JAVA_INT_UNALIGNED, o, 1);
                parts.add(seg);
                ints += size / 256 * 64;
            }
            long[] ends = StreamRead.blockEnds(parts);
            long bytes = ends[ends.length - 1];
            for (int n : new int[]{1, 2, 3, 7}) {
                long sum = 0;
                for (int i = 0; i < n; i++)
                    sum += StreamRead.readShare(parts, ends, StreamRead.shareStart(bytes, n, i), StreamRead.shareStart(bytes, n, i + 1), false);
                assertThat(sum).as("%d shares", n).isEqualTo(ints);
            }
        }
    }
}
