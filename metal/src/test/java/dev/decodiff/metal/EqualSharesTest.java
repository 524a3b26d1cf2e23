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
}
