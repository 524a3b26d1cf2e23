package dev.decodiff.metal;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.Locale;

/**
 * Advice to the kernel about a file mapping's pages ({@code madvise}), where the FFM API has none: that a range will
 * be read soon ({@link #willNeed}: its pages read ahead, asynchronously, and nothing more), or is read at random
 * ({@link #random}: a page fault reads that page, not the megabytes around it that sequential readahead would).
 * Advice only: where it is not available (not Linux) or the kernel refuses it, nothing happens, and reads are the
 * same bytes either way.
 */
public final class MappedPages {
    private static final int MADV_RANDOM = 1, MADV_WILLNEED = 3;
    private static final long PAGE = 4096;
    private static final MethodHandle MADVISE;

    static {
        MethodHandle madvise = null;
        if (System.getProperty("os.name", "").toLowerCase(Locale.ROOT).contains("linux")) {
            try {
                var linker = Linker.nativeLinker();
                madvise = linker.downcallHandle(linker.defaultLookup().find("madvise").orElseThrow(), FunctionDescriptor.of(ValueLayout.JAVA_INT,
                        ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT));
            } catch (RuntimeException | LinkageError e) {
                madvise = null;
            }
        }
        MADVISE = madvise;
    }

    private MappedPages() {}

    /** The pages of {@code s} will be read soon: the kernel starts reading the ones not in memory and returns. */
    public static void willNeed(MemorySegment s) { advise(s, MADV_WILLNEED); }

    /** {@code s} is read at random: a fault reads its own page, without readahead around it. */
    public static void random(MemorySegment s) { advise(s, MADV_RANDOM); }

    private static void advise(MemorySegment s, int advice) {
        if (MADVISE == null || !s.isNative() || !s.isMapped() || s.byteSize() == 0) return;
        long start = s.address() & -PAGE, end = s.address() + s.byteSize();
        try {
            int ignored = (int) MADVISE.invokeExact(start, end - start, advice);
        } catch (Throwable t) {
            // advice only
        }
    }
}
