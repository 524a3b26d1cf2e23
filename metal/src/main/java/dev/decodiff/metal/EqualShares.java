package dev.decodiff.metal;

import java.util.concurrent.CyclicBarrier;
import java.util.function.IntToLongFunction;

/**
 * Runs one share of work on each of {@code n} threads of its own, released together, and times the whole from the
 * common start to the last share done. The yardsticks use it instead of {@link Parallel}: there, a thread that
 * arrives first claims more chunks, so a pass measures the pool's balancing too; here each thread does exactly its
 * share, as a ceiling should.
 */
public final class EqualShares {
    private EqualShares() {}

    /**
     * The wall seconds of running {@code share.applyAsLong(i)} for i in [0, n) on n threads at once: from the first
     * share's start to the last one's end, each read by its own thread (a caller descheduled on a busy machine
     * neither shortens nor stretches the pass).
     */
    public static double seconds(int n, IntToLongFunction share) {
        var sink = new long[n];
        var began = new long[n];
        var ended = new long[n];
        var start = new CyclicBarrier(n);
        var threads = new Thread[n];
        for (int i = 0; i < n; i++) {
            int id = i;
            threads[i] = Thread.ofPlatform().daemon().start(() -> {
                await(start);
                began[id] = System.nanoTime();
                sink[id] = share.applyAsLong(id);
                ended[id] = System.nanoTime();
            });
        }
        for (var t : threads) {
            try {
                t.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted while timing", e);
            }
        }
        long first = Long.MAX_VALUE, last = Long.MIN_VALUE, all = 0;
        for (int i = 0; i < n; i++) {
            first = Math.min(first, began[i]);
            last = Math.max(last, ended[i]);
            all += sink[i];
        }
        if (all == 42) Thread.onSpinWait(); // keeps the shares' results alive (nothing elided)
        return (last - first) / 1e9;
    }

    private static void await(CyclicBarrier b) {
        try {
            b.await();
        } catch (Exception e) {
            throw new IllegalStateException("yardstick threads failed to start together", e);
        }
    }
}
