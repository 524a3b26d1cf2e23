package dev.decodiff.engine;

import dev.decodiff.metal.HugePageMemory;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;

/**
 * Where the engine reads its streamed weight matrices from: the checkpoint's file mapping, or a copy of them in
 * anonymous memory on transparent huge pages. Decode reads every matrix once per token, and through 4 KB file pages
 * it reads them markedly slower than from 2 MB pages (see {@link HugePageMemory}); the copy has the same bytes, so
 * results keep their bits.
 *
 * <p>{@code -Ddecodiff.weights=auto} (the default) copies when the machine has huge pages, the copy leaves at least
 * a quarter of the available memory (and 2 GB) free, and the caller will decode enough tokens for the copy to pay
 * (unknown counts as enough): the copy is a one-time cost (2.6–13 s for E2B's 4.6 GB, most of it the kernel compacting
 * memory into 2 MB pages) that only decode earns back, a fraction of the weights' read time per token, while a
 * prompt's prefill is bound by its arithmetic and runs as fast from the mapping. {@code resident} always copies (and
 * fails without huge pages); {@code mapped} never does.
 */
public final class WeightResidency implements AutoCloseable {
    public enum Mode { AUTO, MAPPED, RESIDENT }

    private static final long ALIGN = 64;
    private static final long MIN_FREE = 2L << 30;
    /**
     * Fewest decode tokens for which auto makes the copy: where the copy reads faster (22 against 31 GB/s) E2B saves
     * ~0.06 s a token, so 2.6–13 s of copying is earned back after 45–220 tokens; on hosts whose file mapping reads as
     * fast it is never earned back. A compare of a long prompt and a few steps maps.
     */
    public static final long COPY_FROM_DECODE_TOKENS = 128;

    private final Arena arena;
    private final String description;
    private final boolean resident;

    private WeightResidency(Arena arena, boolean resident, String description) {
        this.arena = arena;
        this.resident = resident;
        this.description = description;
    }

    public static Mode configured() {
        String v = System.getProperty("decodiff.weights", "auto").trim().toLowerCase(Locale.ROOT);
        return switch (v) {
            case "auto" -> Mode.AUTO;
            case "mapped" -> Mode.MAPPED;
            case "resident" -> Mode.RESIDENT;
            default -> throw new IllegalArgumentException("-Ddecodiff.weights=" + v + ": expected auto, mapped or resident");
        };
    }

    /** The configured policy in one line (for --version): what a model load will do, before any is loaded. */
    public static String policy() {
        Mode mode;
        try {
            mode = configured();
        } catch (IllegalArgumentException e) {
            return e.getMessage();
        }
        var why = HugePageMemory.unavailableReason();
        return switch (mode) {
            case MAPPED -> "mapped from the checkpoint files (-Ddecodiff.weights=mapped)";
            case RESIDENT -> why.map(w -> "resident asked, but no huge pages: " + w).orElse("copied onto huge pages (-Ddecodiff.weights=resident)");
            case AUTO -> why.map(w -> "mapped from the checkpoint files (no huge pages: " + w + ")")
                    .orElse("copied onto huge pages when they fit in the available memory and the run decodes at least " + COPY_FROM_DECODE_TOKENS
                            + " tokens, else mapped (-Ddecodiff.weights=auto)");
        };
    }

    /**
     * Places {@code mapped}'s streamed matrices as {@code mode} says for a caller that will decode {@code decodeTokens}
     * tokens (-1: unknown; under auto, fewer than {@link #COPY_FROM_DECODE_TOKENS} keep the mapping); the result lives
     * until {@link #close}.
     */
    public static Placed<ModelWeights> place(ModelWeights mapped, Mode mode, long decodeTokens) {
        return place(mapped, mapped::withStreamedMatrices, mode, decodeTokens);
    }

    /**
     * {@link #place(ModelWeights, Mode, long)} for any architecture's weights {@code mapped}, whose streamed matrices
     * {@code withStreamed} replaces (each distinct matrix once, a tied head staying tied).
     */
    public static <W> Placed<W> place(W mapped, java.util.function.Function<java.util.function.UnaryOperator<dev.decodiff.metal.WeightMatrix>, W> withStreamed,
                                      Mode mode, long decodeTokens) {
        // the mapped matrices' bytes, the slab they fill (each starting on ALIGN), and the bytes
        // already in anonymous memory (quantized weights dequantized, or their codes blocked, at load): those stay where they are,
        // never copied twice
        long[] sizes = new long[3];
        withStreamed.apply(m -> {
            if (m.data().isMapped()) {
                sizes[0] += m.dataBytes();
                sizes[1] += align(m.dataBytes());
            } else sizes[2] += m.dataBytes();
            return m;
        });
        long bytes = sizes[0];
        if (bytes == 0 && sizes[2] > 0)
            return new Placed<>(mapped, new WeightResidency(null, true, String.format(Locale.ROOT,
                    "resident in anonymous memory (%.2f GB made at load: quantized weights dequantized or their codes blocked%s)", sizes[2] / 1e9, HugePageMemory.available() ? ", on huge pages" : "")));
        String gb = String.format(Locale.ROOT, "%.2f GB", bytes / 1e9);
        if (mode == Mode.MAPPED) return new Placed<>(mapped, new WeightResidency(null, false, "mapped from the checkpoint files (" + gb + ", as asked)"));
        var why = HugePageMemory.unavailableReason();
        if (why.isPresent()) {
            if (mode == Mode.RESIDENT)
                throw new IllegalStateException("-Ddecodiff.weights=resident needs transparent huge pages: " + why.get());
            return new Placed<>(mapped, new WeightResidency(null, false, "mapped from the checkpoint files (" + gb + "; no huge pages: " + why.get() + ")"));
        }
        if (mode == Mode.AUTO && decodeTokens >= 0 && decodeTokens < COPY_FROM_DECODE_TOKENS)
            return new Placed<>(mapped, new WeightResidency(null, false, String.format(Locale.ROOT,
                    "mapped from the checkpoint files (%s; %,d decode tokens to run: the huge-page copy pays from %d on)", gb, decodeTokens, COPY_FROM_DECODE_TOKENS)));
        long available = availableMemory();
        if (mode == Mode.AUTO && available >= 0 && bytes > available - Math.max(MIN_FREE, available / 4))
            return new Placed<>(mapped, new WeightResidency(null, false,
                    String.format(Locale.ROOT, "mapped from the checkpoint files (%s would leave too little of the %.1f GB available)", gb, available / 1e9)));
        var arena = Arena.ofShared();
        try {
            MemorySegment slab = HugePageMemory.allocate(Math.max(sizes[1], 1), arena);
            long[] next = {0};
            var placed = withStreamed.apply(m -> {
                if (!m.data().isMapped()) return m;
                MemorySegment dst = slab.asSlice(next[0], m.dataBytes());
                MemorySegment.copy(m.data(), 0, dst, 0, m.dataBytes());
                // The copy faulted the file's pages into this process; drop them (they stay in the page cache) so the
                // weights are not counted twice in its resident set.
                if (m.data().isMapped()) m.data().unload();
                next[0] += align(m.dataBytes());
                return m.withData(dst);
            });
            return new Placed<>(placed, new WeightResidency(arena, true, "resident in anonymous memory on huge pages (" + gb + " copied from the checkpoint files)"));
        } catch (RuntimeException | OutOfMemoryError e) {
            arena.close();
            if (mode == Mode.RESIDENT) throw e;
            return new Placed<>(mapped, new WeightResidency(null, false, "mapped from the checkpoint files (" + gb + "; the copy failed: " + e.getMessage() + ")"));
        }
    }

    /** The weights as placed, and the placement (which owns the copy). */
    public record Placed<W>(W weights, WeightResidency residency) {}

    public boolean resident() { return resident; }

    /** One line for --version and bench: where the weights are read from, and why. */
    public String description() { return description; }

    private static long align(long bytes) { return (bytes + ALIGN - 1) / ALIGN * ALIGN; }

    /** MemAvailable from /proc/meminfo in bytes, or -1 when unknown. */
    static long availableMemory() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/meminfo"))) {
                if (line.startsWith("MemAvailable:")) {
                    String[] f = line.trim().split("\\s+");
                    return Long.parseLong(f[1]) * 1024;
                }
            }
        } catch (IOException | RuntimeException e) {
            return -1;
        }
        return -1;
    }

    @Override
    public void close() {
        if (arena != null) arena.close();
    }
}
