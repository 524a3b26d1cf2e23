package dev.decodiff.harness.bench;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.management.GarbageCollectionNotificationInfo;
import dev.decodiff.harness.PartClock;
import dev.decodiff.harness.cli.Main;

import javax.management.NotificationEmitter;
import javax.management.openmbean.CompositeData;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryType;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;

/**
 * The child JVM of {@code bench --compare-rss}: runs one decodiff command through its CLI in this JVM and writes what
 * it cost in memory to a JSON file. Linux only (it reads /proc/self).
 *
 * <p>Usage: {@code MeasuredRun RESULT.json CHECKPOINT_DIR REFERENCE_DIR decodiff-arguments…}; the two folders only name
 * the mapped files whose resident pages are counted apart from the rest.
 */
public final class MeasuredRun {
    private MeasuredRun() {}

    public static void main(String[] args) throws Exception {
        Path result = Path.of(args[0]);
        var sampler = new RssSampler(Path.of(args[1]), Path.of(args[2]));
        var maxHeap = new AtomicLong();
        var maxLive = new AtomicLong();
        watchGcs(maxHeap, maxLive);
        var thread = Thread.ofPlatform().daemon().name("decodiff-rss-sampler").start(() -> sampler.run(maxHeap));
        double jvmStart = ManagementFactory.getRuntimeMXBean().getUptime() / 1e3, cpu0 = PartClock.processCpuS();
        String load0 = loadAverage();
        PartClock.reset();
        long t0 = System.nanoTime();
        int code = Main.execute(Arrays.copyOfRange(args, 3, args.length));
        double wall = BenchSetup.secondsSince(t0), cpu = PartClock.processCpuS() - cpu0;
        var parts = PartClock.snapshot();
        sampler.stop();
        thread.join();
        maxHeap.accumulateAndGet(heapUsed(), Math::max);
        var peak = sampler.peak();
        var o = new ObjectMapper().createObjectNode();
        o.put("exit", code);
        o.put("wall_s", wall);
        o.put("cpu_s", cpu);
        o.put("jvm_start_s", jvmStart);
        o.put("load_average_start", load0);
        o.put("load_average_end", loadAverage());
        var p = o.putObject("parts");
        parts.forEach((name, spent) -> {
            var e = p.putObject(name);
            e.put("wall_s", spent.wallS());
            e.put("cpu_s", spent.cpuS());
        });
        // VmHWM, unless a sample saw more: the kernel's resident-set counters lag /proc/self/smaps by up to a few hundred KB
        o.put("peak_rss_bytes", Math.max(RssSampler.statusBytes("VmHWM:"), peak.total()));
        o.put("sampled_peak_rss_bytes", peak.total());
        o.put("weights_rss_bytes", peak.weights());
        o.put("reference_rss_bytes", peak.reference());
        o.put("other_files_rss_bytes", peak.otherFiles());
        o.put("anonymous_rss_bytes", peak.anonymous());
        o.put("anonymous_huge_pages_rss_bytes", peak.anonymousHuge());
        o.put("heap_committed_at_peak_bytes", peak.heapCommitted());
        o.put("max_heap_used_bytes", maxHeap.get());
        o.put("max_heap_live_bytes", maxLive.get());
        o.put("heap_limit_bytes", Runtime.getRuntime().maxMemory());
        Files.writeString(result, o.toPrettyString());
        System.exit(code);
    }

    /** /proc/loadavg's 1-, 5- and 15-minute load averages ("" where there is none). */
    static String loadAverage() {
        try {
            String[] f = Files.readString(Path.of("/proc/loadavg")).trim().split("\\s+");
            return f[0] + " " + f[1] + " " + f[2];
        } catch (IOException | RuntimeException e) {
            return "";
        }
    }

    /** Heap in use now, all heap pools together. */
    static long heapUsed() {
        return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
    }

    /**
     * The heap's high-water mark is just before a collection: each GC notification's heap in use before it is a
     * candidate (a sampler would miss most of them between two reads). What a collection leaves is what was live.
     */
    private static void watchGcs(AtomicLong maxHeap, AtomicLong maxLive) {
        Set<String> heapPools = ManagementFactory.getMemoryPoolMXBeans().stream().filter(p -> p.getType() == MemoryType.HEAP)
                .map(java.lang.management.MemoryPoolMXBean::getName).collect(Collectors.toSet());
        for (var gc : ManagementFactory.getGarbageCollectorMXBeans()) {
            if (!(gc instanceof NotificationEmitter e)) continue;
            e.addNotificationListener((n, hb) -> {
                if (!n.getType().equals(GarbageCollectionNotificationInfo.GARBAGE_COLLECTION_NOTIFICATION)) return;
                var info = GarbageCollectionNotificationInfo.from((CompositeData) n.getUserData()).getGcInfo();
                long before = 0, after = 0;
                for (var u : info.getMemoryUsageBeforeGc().entrySet()) if (heapPools.contains(u.getKey())) before += u.getValue().getUsed();
                for (var u : info.getMemoryUsageAfterGc().entrySet()) if (heapPools.contains(u.getKey())) after += u.getValue().getUsed();
                maxHeap.accumulateAndGet(before, Math::max);
                maxLive.accumulateAndGet(after, Math::max);
            }, null, null);
        }
    }

    /** Reads the resident set now and then; at each new high, what it is made of (from /proc/self/smaps, at most once a second). */
    static final class RssSampler {
        /** A resident set split by what backs its pages. */
        record Split(long total, long weights, long reference, long otherFiles, long anonymous, long anonymousHuge, long heapCommitted) {}

        private final Path weights, reference;
        private volatile boolean stopped;
        private Split peak = new Split(0, 0, 0, 0, 0, 0, 0);
        private long lastSplitNanos;

        RssSampler(Path weights, Path reference) {
            this.weights = real(weights);
            this.reference = real(reference);
        }

        private static Path real(Path p) {
            try {
                return p.toRealPath();
            } catch (IOException e) {
                return p.toAbsolutePath().normalize();
            }
        }

        void stop() { stopped = true; }

        synchronized Split peak() { return peak; }

        void run(AtomicLong maxHeap) {
            while (!stopped) {
                long rss = statusBytes("VmRSS:");
                maxHeap.accumulateAndGet(heapUsed(), Math::max);
                synchronized (this) {
                    // a new high by more than 1 %, or any new high once a second has passed: split it (smaps is slow to read)
                    boolean due = System.nanoTime() - lastSplitNanos > 1_000_000_000L;
                    if (rss > peak.total() * 1.01 || (rss > peak.total() && due)) {
                        var s = split();
                        if (s.total() > peak.total()) peak = s;
                        lastSplitNanos = System.nanoTime();
                    }
                }
                try {
                    Thread.sleep(100);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }

        /**
         * The resident set by mapping: pages of files under the checkpoint, under the reference, other files, anonymous
         * (and how much of that sits on transparent huge pages: the engine's copy of the weights, where it makes one).
         */
        Split split() {
            long w = 0, r = 0, f = 0, a = 0, huge = 0;
            int kind = 3;
            try (var lines = Files.lines(Path.of("/proc/self/smaps"))) {
                for (String line : (Iterable<String>) lines::iterator) {
                    if (isMappingHeader(line)) {
                        String[] parts = line.split("\\s+", 6);
                        String file = parts.length == 6 ? parts[5].strip() : "";
                        kind = !file.startsWith("/") ? 3 : Path.of(file).startsWith(weights) ? 0 : Path.of(file).startsWith(reference) ? 1 : 2;
                    } else if (line.startsWith("Rss:")) {
                        long kb = Long.parseLong(line.replaceAll("[^0-9]", ""));
                        switch (kind) {
                            case 0 -> w += kb;
                            case 1 -> r += kb;
                            case 2 -> f += kb;
                            default -> a += kb;
                        }
                    } else if (line.startsWith("AnonHugePages:")) {
                        huge += Long.parseLong(line.replaceAll("[^0-9]", ""));
                    }
                }
            } catch (IOException | RuntimeException e) {
                return new Split(statusBytes("VmRSS:"), 0, 0, 0, 0, 0, Runtime.getRuntime().totalMemory());
            }
            return new Split((w + r + f + a) * 1024, w * 1024, r * 1024, f * 1024, a * 1024, huge * 1024, Runtime.getRuntime().totalMemory());
        }

        /** "7f12a0000000-7f12a8000000 r--s 00000000 fd:00 1234  /path": a range of hex digits, then the permissions. */
        private static boolean isMappingHeader(String line) {
            int dash = line.indexOf('-'), space = line.indexOf(' ');
            if (dash <= 0 || space <= dash) return false;
            for (int i = 0; i < space; i++) {
                char c = line.charAt(i);
                if (i != dash && Character.digit(c, 16) < 0) return false;
            }
            return true;
        }

        /** A "Vm…:  123 kB" line of /proc/self/status in bytes (0 where there is none). */
        static long statusBytes(String key) {
            try {
                for (String line : Files.readAllLines(Path.of("/proc/self/status")))
                    if (line.startsWith(key)) return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
            } catch (IOException | RuntimeException ignored) {
                // not Linux
            }
            return 0;
        }
    }
}
