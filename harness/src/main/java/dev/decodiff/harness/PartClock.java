package dev.decodiff.harness;

import java.lang.management.ManagementFactory;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Where a run's time goes: wall time and the process's CPU time charged to named parts (prefill, capture, compare,
 * the observer check, …), each moment to the innermost part open, so nested parts are exclusive (a tensor compared
 * while the engine computes counts as compare, not prefill). Parts are opened by one thread at a time (the command's);
 * the CPU time is the whole process's (the engine's and the kernels' worker threads included, and the JIT's and the
 * collector's while the part runs). {@code bench --compare-time} reads it in the child JVM; nothing else depends on it.
 */
public final class PartClock {
    /** Seconds charged to one part. */
    public record Spent(double wallS, double cpuS) {
        Spent plus(double wall, double cpu) { return new Spent(wallS + wall, cpuS + cpu); }
    }

    private static final java.lang.management.OperatingSystemMXBean OS = ManagementFactory.getOperatingSystemMXBean();
    private static final Map<String, Spent> spent = new LinkedHashMap<>();
    private static final String[] stack = new String[32];
    private static int depth;
    private static long lastWall, lastCpu;

    private PartClock() {}

    /** An open part: closing it charges the time since the last switch to it and returns to the part it interrupted. */
    public static final class Part implements AutoCloseable {
        private final int level;

        private Part(int level) { this.level = level; }

        @Override
        public void close() {
            synchronized (PartClock.class) {
                if (level < 0 || depth <= level) return; // never opened, or a reset came between
                charge();
                depth = level; // parts left open inside it end with it
            }
        }
    }

    /** Opens part {@code name}; the time until it closes (less the parts opened inside it) is charged to it. */
    public static Part enter(String name) {
        synchronized (PartClock.class) {
            if (depth == stack.length) return new Part(-2);
            if (depth > 0) charge();
            else mark();
            stack[depth] = name;
            return new Part(depth++);
        }
    }

    /** The parts charged since the last {@link #reset}, in the order first opened. */
    public static synchronized Map<String, Spent> snapshot() { return new LinkedHashMap<>(spent); }

    /** Forgets every part (a fresh measurement). */
    public static synchronized void reset() {
        spent.clear();
        depth = 0;
    }

    /** The process's CPU time so far in seconds, every thread together (-1 where the JVM cannot tell). */
    public static double processCpuS() {
        return OS instanceof com.sun.management.OperatingSystemMXBean os ? os.getProcessCpuTime() / 1e9 : -1;
    }

    private static void charge() {
        long wall = System.nanoTime(), cpu = cpuNanos();
        spent.merge(stack[depth - 1], new Spent((wall - lastWall) / 1e9, (cpu - lastCpu) / 1e9), (a, b) -> a.plus(b.wallS(), b.cpuS()));
        lastWall = wall;
        lastCpu = cpu;
    }

    private static void mark() {
        lastWall = System.nanoTime();
        lastCpu = cpuNanos();
    }

    private static long cpuNanos() {
        return OS instanceof com.sun.management.OperatingSystemMXBean os ? Math.max(0, os.getProcessCpuTime()) : 0;
    }
}
