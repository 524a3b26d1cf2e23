package dev.decodiff.metal;

import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Locale;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The bf16 matvec and GEMM of src/main/c/decodiff_kernels.c, called through FFM. The build compiles that file when
 * gcc is present (Linux x86-64) into the jar; here it is loaded when the CPU has AVX-512, and the Java kernels of
 * {@link WeightMatrix} run otherwise. Both give the same bits (WeightMatrixTest holds them to one scalar reference).
 *
 * <p>Why it exists: decode is a bf16 matvec over far more weights than any cache holds. The Java kernel reaches
 * ~0.77 of the streaming-read bandwidth because Java cannot prefetch; the native one prefetches the rows ahead into
 * L2 and reads as fast as the native streaming reader (0.95-1.04 of it, one thread, CPU time).
 * {@code -Ddecodiff.kernels=java} turns it off.
 *
 * <p>The calls are "critical" downcalls: they take Java float arrays in place (no copy) and run for at most one
 * chunk of a matrix (Parallel cuts every call into chunks), so a GC waits for a few milliseconds at most.
 */
public final class NativeKernels {
    static final String RESOURCE = "/native/linux-x86_64/libdecodiff_kernels.so";
    private static final int ABI = 3;

    private static final MethodHandle MATVEC;
    private static final MethodHandle MATMUL;
    private static final MethodHandle STREAM;
    /** The AVX512-BF16 GEMM of --matmul bf16, or null where the CPU lacks those instructions. */
    private static final MethodHandle MATMUL_BF16DOT;
    /** Floats of scratch the native GEMMs need for a number of columns and tokens. */
    private static final MethodHandle SCRATCH_FLOATS;
    /** Each thread's GEMM scratch, grown as needed (only a native call reads it, and a thread makes one at a time). */
    private static final ThreadLocal<MemorySegment> SCRATCH = new ThreadLocal<>();
    private static final String STATUS;

    static {
        MethodHandle mv = null, mm = null, sr = null, dot = null, scratch = null;
        String status;
        try {
            var lookup = load();
            var linker = Linker.nativeLinker();
            var abi = linker.downcallHandle(find(lookup, "decodiff_abi_version"), FunctionDescriptor.of(JAVA_INT));
            var cpu = linker.downcallHandle(find(lookup, "decodiff_cpu_supported"), FunctionDescriptor.of(JAVA_INT));
            int version = (int) abi.invokeExact();
            if (version != ABI) {
                status = "java (native kernels have ABI " + version + ", this build expects " + ABI + ")";
            } else if ((int) cpu.invokeExact() != 1) {
                status = "java (this CPU has no AVX-512)";
            } else {
                var critical = Linker.Option.critical(true);
                mv = linker.downcallHandle(find(lookup, "decodiff_matvec_bf16"),
                        FunctionDescriptor.ofVoid(ADDRESS, JAVA_LONG, JAVA_INT, JAVA_INT, ADDRESS, ADDRESS), critical);
                mm = linker.downcallHandle(find(lookup, "decodiff_matmul_bf16"),
                        FunctionDescriptor.ofVoid(ADDRESS, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT, ADDRESS, ADDRESS), critical);
                sr = linker.downcallHandle(find(lookup, "decodiff_stream_read"), FunctionDescriptor.of(JAVA_LONG, ADDRESS, JAVA_LONG), critical);
                scratch = linker.downcallHandle(find(lookup, "decodiff_matmul_scratch_floats"), FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_INT));
                if ((int) linker.downcallHandle(find(lookup, "decodiff_cpu_bf16dot"), FunctionDescriptor.of(JAVA_INT)).invokeExact() == 1)
                    dot = linker.downcallHandle(find(lookup, "decodiff_matmul_bf16dot"),
                            FunctionDescriptor.ofVoid(ADDRESS, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT, ADDRESS, ADDRESS), critical);
                status = "native avx512 (FFM)";
            }
        } catch (Unavailable e) {
            status = "java (" + e.getMessage() + ")";
        } catch (Throwable t) {
            status = "java (native kernels failed to load: " + t + ")";
        }
        boolean off = "java".equalsIgnoreCase(System.getProperty("decodiff.kernels", "auto"));
        MATVEC = off ? null : mv;
        MATMUL = off ? null : mm;
        SCRATCH_FLOATS = scratch;
        STREAM = off ? null : sr;
        MATMUL_BF16DOT = off ? null : dot;
        STATUS = off && mv != null ? "java (-Ddecodiff.kernels=java)" : status;
    }

    private NativeKernels() {}

    /** Whether bf16 matrices run on the native kernels. */
    public static boolean available() { return MATVEC != null; }

    /** Which kernels run, and why not the native ones when they don't: for bench and --version output. */
    public static String status() { return STATUS; }

    /** Whether this build should have native kernels on this machine (Linux x86-64 with AVX-512): tests hold it to that. */
    public static boolean expectedHere() {
        if (!linuxX86()) return false;
        try {
            for (String line : Files.readAllLines(Path.of("/proc/cpuinfo")))
                if (line.startsWith("flags")) return line.contains(" avx512f");
        } catch (IOException e) {
            return false;
        }
        return false;
    }

    /** y[r] = W[r]·x for r in [from, to); w holds bf16 [rows, cols]; x from xOff, y from yOff (index r). */
    static void matvecBf16(MemorySegment w, int cols, int from, int to, MemorySegment x, MemorySegment y) {
        try {
            MATVEC.invokeExact(w, (long) cols, from, to, x, y);
        } catch (Throwable t) {
            throw new IllegalStateException("native matvec failed", t);
        }
    }

    /** Reads bytes [0, n) of seg (n a multiple of 256) with prefetching; returns a checksum. */
    static long streamRead(MemorySegment seg, long n) {
        try {
            return (long) STREAM.invokeExact(seg, n);
        } catch (Throwable t) {
            throw new IllegalStateException("native stream read failed", t);
        }
    }

    /** Whether --matmul bf16 runs on AVX512-BF16 dot products here (otherwise on the fp32 kernels, activations rounded alike). */
    public static boolean bf16DotAvailable() { return MATMUL_BF16DOT != null; }

    /** As {@link #matmulBf16} with X in bf16 ([tokens, cols] shorts) and AVX512-BF16 dot products; scratch as there. */
    static void matmulBf16Dot(MemorySegment w, int cols, int rows, int from, int to, MemorySegment x, int tokens, MemorySegment y, MemorySegment scratch) {
        try {
            MATMUL_BF16DOT.invokeExact(w, (long) cols, rows, from, to, x, tokens, y, scratch);
        } catch (Throwable t) {
            throw new IllegalStateException("native bf16 matmul failed", t);
        }
    }

    /**
     * This thread's scratch for a native GEMM of up to {@code tokens} tokens of {@code cols} columns (accumulators and
     * packed copies of the operands), kept for the thread's next call.
     */
    static MemorySegment matmulScratch(int cols, int tokens) {
        long floats;
        try {
            floats = (long) SCRATCH_FLOATS.invokeExact((long) cols, tokens);
        } catch (Throwable t) {
            throw new IllegalStateException("native matmul scratch size failed", t);
        }
        var scratch = SCRATCH.get();
        if (scratch == null || scratch.byteSize() < floats * Float.BYTES) {
            scratch = Arena.ofAuto().allocate(floats * Float.BYTES, 64);
            SCRATCH.set(scratch);
        }
        return scratch;
    }

    /** Y[t·rows + r] = W[r]·X[t] for r in [from, to), t < tokens; scratch from {@link #matmulScratch} for cols and tokens. */
    static void matmulBf16(MemorySegment w, int cols, int rows, int from, int to, MemorySegment x, int tokens, MemorySegment y, MemorySegment scratch) {
        try {
            MATMUL.invokeExact(w, (long) cols, rows, from, to, x, tokens, y, scratch);
        } catch (Throwable t) {
            throw new IllegalStateException("native matmul failed", t);
        }
    }

    private static boolean linuxX86() {
        String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT), arch = System.getProperty("os.arch", "");
        return os.contains("linux") && (arch.equals("amd64") || arch.equals("x86_64"));
    }

    private static final class Unavailable extends Exception {
        Unavailable(String why) { super(why); }
    }

    private static MemorySegment find(SymbolLookup lookup, String name) throws Unavailable {
        return lookup.find(name).orElseThrow(() -> new Unavailable("native library lacks " + name));
    }

    private static SymbolLookup load() throws Unavailable, IOException {
        if (!linuxX86())
            throw new Unavailable("native kernels are built for Linux x86-64 only, this is "
                    + System.getProperty("os.name") + " " + System.getProperty("os.arch"));
        var url = NativeKernels.class.getResource(RESOURCE);
        if (url == null) throw new Unavailable("no native library in this build: gcc was not found when it was built");
        Path lib;
        if (url.getProtocol().equals("file")) {
            try {
                lib = Path.of(url.toURI());
            } catch (URISyntaxException e) {
                throw new IOException(e);
            }
        } else {
            // Inside a jar: the loader needs a file. A private temporary copy, removed when the JVM exits.
            lib = Files.createTempFile("decodiff-kernels-", ".so");
            lib.toFile().deleteOnExit();
            try (InputStream in = url.openStream()) {
                Files.copy(in, lib, StandardCopyOption.REPLACE_EXISTING);
            }
        }
        return SymbolLookup.libraryLookup(lib, Arena.global());
    }
}
