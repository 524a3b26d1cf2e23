package dev.decodiff.metal;

import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.ArrayList;

/**
 * Splits a range of work over the machine's cores. The calling thread takes the first slice, so a
 * single-core machine or a tiny range costs no hand-off at all.
 */
public final class Parallel {
    private static final int THREADS = Integer.getInteger("decodiff.threads", Runtime.getRuntime().availableProcessors());
    private static final ExecutorService POOL = Executors.newFixedThreadPool(Math.max(1, THREADS - 1), r -> {
        var t = new Thread(r, "decodiff-worker");
        t.setDaemon(true);
        return t;
    });

    private Parallel() {}

    public static int threads() { return THREADS; }

    @FunctionalInterface
    public interface RangeBody {
        void run(int from, int to);
    }

    /** Runs body over [0, n) in contiguous slices aligned to {@code grain}; small ranges run inline. */
    public static void forRange(int n, int grain, RangeBody body) {
        int slices = Math.min(THREADS, Math.max(1, n / Math.max(1, grain)));
        if (slices <= 1) {
            body.run(0, n);
            return;
        }
        int per = (n + slices - 1) / slices;
        per = ((per + grain - 1) / grain) * grain;
        var futures = new ArrayList<Future<?>>(slices - 1);
        for (int s = 1; s < slices; s++) {
            int from = s * per, to = Math.min(n, from + per);
            if (from >= to) break;
            futures.add(POOL.submit(() -> body.run(from, to)));
        }
        body.run(0, Math.min(n, per));
        for (var f : futures) {
            try {
                f.get();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted", e);
            } catch (java.util.concurrent.ExecutionException e) {
                if (e.getCause() instanceof RuntimeException re) throw re;
                if (e.getCause() instanceof Error err) throw err;
                throw new IllegalStateException(e.getCause());
            }
        }
    }
}
