package dev.decodiff.metal;

import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Splits a range of work over the machine's cores with a pool of spinning workers. A decode step makes a few
 * hundred short parallel calls (one per matrix); handing each to an executor costs tens of microseconds of
 * wake-up, so the workers instead spin for a while after each call and only park when the engine goes quiet.
 *
 * <p>The range is cut into chunks that threads claim from a per-call counter. The calling thread claims too, and
 * never waits for a worker that has not started: if the workers are slow to arrive (another process holds the
 * cores), the caller simply does all the chunks itself and waits only for chunks already claimed.
 *
 * <p>Calls made from inside a body, or while another thread is using the pool, run inline: correct, just not
 * parallel. Each index of the range is run by exactly one thread, so a body whose result per index does not
 * depend on the split gives bit-identical results for any thread count.
 */
public final class Parallel {
    private static final int THREADS = Math.max(1, Integer.getInteger("decodiff.threads", Runtime.getRuntime().availableProcessors()));
    /** How long an idle worker spins before it parks (a decode step's gaps between matrices are far shorter). */
    private static final long SPIN_NANOS = Long.getLong("decodiff.spinMicros", 1_000) * 1_000;
    /** Chunks per thread: enough to balance a core that another process slows down, few enough to stay cheap. */
    private static final int CHUNKS_PER_THREAD = 4;

    private static final ReentrantLock POOL_LOCK = new ReentrantLock();
    private static final Worker[] WORKERS = new Worker[THREADS - 1];
    private static final ThreadLocal<Boolean> IN_BODY = ThreadLocal.withInitial(() -> false);
    /** The current call; each call is a new object, so a worker arriving late finds its chunks all claimed. */
    private static volatile Job current;

    static {
        for (int i = 0; i < WORKERS.length; i++) {
            var w = new Worker();
            var t = new Thread(w, "decodiff-worker-" + (i + 1));
            t.setDaemon(true);
            w.thread = t;
            WORKERS[i] = w;
            t.start();
        }
    }

    private Parallel() {}

    public static int threads() { return THREADS; }

    @FunctionalInterface
    public interface RangeBody {
        void run(int from, int to);
    }

    private static final class Job {
        final RangeBody body;
        /** Chunk c is [bounds[c], bounds[c + 1]). */
        final int[] bounds;
        final int chunks;
        final AtomicInteger next = new AtomicInteger();
        final AtomicInteger done = new AtomicInteger();
        volatile Throwable failure;

        Job(RangeBody body, int[] bounds) {
            this.body = body;
            this.bounds = bounds;
            this.chunks = bounds.length - 1;
        }

        /** Claims and runs chunks until none is left. */
        void work() {
            for (int c; (c = next.getAndIncrement()) < chunks; ) {
                try {
                    if (failure == null) body.run(bounds[c], bounds[c + 1]);
                } catch (Throwable t) {
                    if (failure == null) failure = t;
                } finally {
                    done.incrementAndGet();
                }
            }
        }
    }

    /**
     * Runs body over [0, n) in contiguous slices whose bounds are multiples of {@code grain} (except the last);
     * small ranges run inline.
     */
    public static void forRange(int n, int grain, RangeBody body) { forRange(n, grain, CHUNKS_PER_THREAD, body); }

    /** {@link #forRange(int, int, RangeBody)} cut into at most {@code chunksPerThread} pieces per thread. */
    public static void forRange(int n, int grain, int chunksPerThread, RangeBody body) {
        int g = Math.max(1, grain);
        run(n, g, body, () -> {
            int chunks = Math.min(n / g, THREADS * Math.max(1, chunksPerThread));
            int per = (n + chunks - 1) / chunks;
            per = ((per + g - 1) / g) * g;
            int[] bounds = new int[(n + per - 1) / per + 1];
            for (int c = 1; c < bounds.length; c++) bounds[c] = Math.min(n, c * per);
            return bounds;
        });
    }

    /**
     * {@link #forRange(int, int, RangeBody)} in chunks that shrink toward the end: each a 1 / (2 · threads) share of
     * what is left (a multiple of {@code grain}, at least one grain), so the threads finish within a grain of each
     * other however the machine slows one of them, while the first chunks stay large. For work whose result per index
     * does not depend on the split (decode's matvec).
     */
    public static void forRangeGuided(int n, int grain, RangeBody body) {
        int g = Math.max(1, grain);
        run(n, g, body, () -> {
            int[] b = new int[n / g + 2];
            int c = 0;
            for (int from = 0; from < n; ) {
                from = Math.min(n, from + Math.max(g, (n - from) / (2 * THREADS) / g * g));
                b[++c] = from;
            }
            return java.util.Arrays.copyOf(b, c + 1);
        });
    }

    /**
     * {@link #forRange(int, int, RangeBody)} for decode's matvecs: one large contiguous piece per thread covering 15/16
     * of the range, then the rest in {@link #forRangeGuided}'s shrinking pieces, so the threads still finish within a
     * grain of each other. Every piece is one pass of a native kernel over its rows, and each pass starts its
     * prefetching from nothing: the dozen shrinking pieces a 2,048-row matrix used to be cut into read its 1.8 MB of
     * 4-bit codes at 11-13 GB/s where one piece per thread reads them at 16-17 (two threads, a C loop over 400 such
     * matrices). A thread that arrives late finds the pieces claimed by the other, as with every split here.
     */
    public static void forRangeInHalves(int n, int grain, RangeBody body) {
        int g = Math.max(1, grain);
        run(n, g, body, () -> {
            int[] b = new int[n / g + THREADS + 2];
            int c = 0, from = 0, big = (n - (n >> 4)) / THREADS / g * g;
            if (big > 0) for (int t = 0; t < THREADS; t++) b[++c] = from += big;
            while (from < n) {
                from = Math.min(n, from + Math.max(g, (n - from) / (2 * THREADS) / g * g));
                b[++c] = from;
            }
            return java.util.Arrays.copyOf(b, c + 1);
        });
    }

    private static void run(int n, int grain, RangeBody body, java.util.function.Supplier<int[]> split) {
        if (THREADS == 1 || n / grain <= 1 || IN_BODY.get() || !POOL_LOCK.tryLock()) {
            body.run(0, n);
            return;
        }
        try {
            var job = new Job(body, split.get());
            int chunks = job.chunks;
            current = job;
            for (var w : WORKERS) w.wake();
            IN_BODY.set(true);
            try {
                job.work();
            } finally {
                IN_BODY.set(false);
            }
            // Only chunks a worker has claimed remain; wait for them, yielding so a descheduled worker gets a core.
            for (int spins = 0; job.done.get() < chunks; spins++) {
                if (spins < 256) Thread.onSpinWait();
                else Thread.yield();
            }
            current = null;
            Throwable t = job.failure;
            if (t != null) {
                if (t instanceof RuntimeException re) throw re;
                if (t instanceof Error err) throw err;
                throw new IllegalStateException(t);
            }
        } finally {
            POOL_LOCK.unlock();
        }
    }

    private static final class Worker implements Runnable {
        Thread thread;
        private volatile boolean parked;

        void wake() {
            if (parked) LockSupport.unpark(thread);
        }

        @Override
        public void run() {
            IN_BODY.set(true);
            Job last = null;
            long idleSince = System.nanoTime();
            while (true) {
                Job j = current;
                if (j != null && j != last) {
                    last = j;
                    j.work();
                    idleSince = System.nanoTime();
                    continue;
                }
                if (System.nanoTime() - idleSince < SPIN_NANOS) {
                    Thread.onSpinWait();
                    continue;
                }
                parked = true;
                j = current;
                if (j == null || j == last) LockSupport.parkNanos(this, 100_000_000L);
                parked = false;
                idleSince = System.nanoTime();
            }
        }
    }
}
