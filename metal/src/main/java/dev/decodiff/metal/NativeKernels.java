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
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The bf16 matvec and GEMM of src/main/c/decodiff_kernels.c, called through FFM. The build compiles that file and
 * decodiff_kernels_avx2.c when gcc is present (Linux x86-64) into the jar; here the AVX-512 kernels are loaded when
 * the CPU has AVX-512, the AVX2 ones (matvec, GEMM, attention; MLX 4-/8-bit weights with F16C) when it has AVX2 and
 * FMA only, and the Java kernels of {@link WeightMatrix} run otherwise. All give the same bits (WeightMatrixTest holds them to one scalar reference).
 * The AVX2 kernels matter more than speed-ups: the Java kernels use 512-bit vectors (the contract's sixteen lanes),
 * which HotSpot runs as plain Java loops where the CPU has none, tens of times slower.
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
    private static final int ABI = 10;

    private static final MethodHandle MATVEC;
    private static final MethodHandle MATMUL;
    /** The matvec and GEMM on fp32 weights, or null: the AVX2 kernels have them (for matrices dequantized to fp32 at load). */
    private static final MethodHandle MATVEC_F32, MATMUL_F32;
    private static final MethodHandle STREAM;
    /** The AVX512-BF16 GEMM of --matmul bf16, or null where the CPU lacks those instructions. */
    private static final MethodHandle MATMUL_BF16DOT;
    /** The matvec and GEMM on MLX affine 4-/8-bit codes, or null where the CPU has neither the AVX-512 set they need nor AVX2 with F16C. */
    private static final MethodHandle MATVEC_AFFINE, MATMUL_AFFINE, AFFINE_BLOCK, AFFINE_BLOCK_PAIRS;
    /** The AMX tile GEMM, its activation packers and its peak loop, or null where the CPU or the kernel refuses AMX. */
    private static final MethodHandle MATMUL_AMX, AMX_PACK_X, AMX_PACK_XR, AMX_PACKED_SHORTS, AMX_SCRATCH_SHORTS, AMX_LOOP;
    /** Columns of one K slice of the AMX GEMM (its chunks of tokens are sized for a slice's activations). */
    private static final int AMX_SLICE_COLUMNS;
    /** Each thread's AMX scratch (packed weight rows), grown as needed. */
    private static final ThreadLocal<MemorySegment> AMX_SCRATCH = new ThreadLocal<>();
    /** Floats of scratch the native GEMMs need for a number of columns and tokens. */
    private static final MethodHandle SCRATCH_FLOATS;
    /** Attention's score and value loops over f32 cache rows (VectorMath's contract, the same bits). */
    private static final MethodHandle ATTENTION_SCORES, ATTENTION_VALUES;
    /** Each thread's GEMM scratch, grown as needed (only a native call reads it, and a thread makes one at a time). */
    private static final ThreadLocal<MemorySegment> SCRATCH = new ThreadLocal<>();
    private static final String STATUS;

    static {
        MethodHandle mv = null, mm = null, sr = null, dot = null, scratch = null, mvq = null, mmq = null, blk = null, blkp = null;
        MethodHandle scores = null, values = null, mvf = null, mmf = null;
        MethodHandle amx = null, packX = null, packXr = null, packedShorts = null, amxScratch = null, amxLoop = null;
        int sliceColumns = 0;
        String status, amxStatus = "";
        boolean amxOff = "off".equalsIgnoreCase(System.getProperty("decodiff.amx", "auto")), avx512 = false;
        try {
            var lookup = load();
            var linker = Linker.nativeLinker();
            var abi = linker.downcallHandle(find(lookup, "decodiff_abi_version"), FunctionDescriptor.of(JAVA_INT));
            var cpu = linker.downcallHandle(find(lookup, "decodiff_cpu_supported"), FunctionDescriptor.of(JAVA_INT));
            int version = (int) abi.invokeExact();
            if (version != ABI) {
                status = "java (native kernels have ABI " + version + ", this build expects " + ABI + ")";
            } else if ((int) cpu.invokeExact() != 1
                    && (int) linker.downcallHandle(find(lookup, "decodiff_cpu_avx2"), FunctionDescriptor.of(JAVA_INT)).invokeExact() != 1) {
                status = "java (this CPU has neither AVX-512 nor AVX2 with FMA)";
            } else {
                // Without AVX-512, the AVX2 kernels (decodiff_kernels_avx2.c) take the same calls and give the same bits.
                avx512 = (int) cpu.invokeExact() == 1;
                String isa = avx512 ? "" : "_avx2";
                var critical = Linker.Option.critical(true);
                mv = linker.downcallHandle(find(lookup, "decodiff_matvec_bf16" + isa),
                        FunctionDescriptor.ofVoid(ADDRESS, JAVA_LONG, JAVA_INT, JAVA_INT, ADDRESS, ADDRESS), critical);
                mm = linker.downcallHandle(find(lookup, "decodiff_matmul_bf16" + isa),
                        FunctionDescriptor.ofVoid(ADDRESS, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT, ADDRESS, ADDRESS), critical);
                sr = linker.downcallHandle(find(lookup, "decodiff_stream_read" + isa), FunctionDescriptor.of(JAVA_LONG, ADDRESS, JAVA_LONG), critical);
                scratch = linker.downcallHandle(find(lookup, "decodiff_matmul_scratch_floats" + isa), FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_INT));
                scores = linker.downcallHandle(find(lookup, "decodiff_attention_scores" + isa), FunctionDescriptor.ofVoid(ADDRESS, JAVA_INT, JAVA_INT, JAVA_INT,
                        JAVA_INT, JAVA_INT, ADDRESS, ADDRESS, JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT), critical);
                values = linker.downcallHandle(find(lookup, "decodiff_attention_values" + isa), FunctionDescriptor.ofVoid(ADDRESS, JAVA_INT, JAVA_INT, JAVA_INT,
                        JAVA_INT, ADDRESS, ADDRESS, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT), critical);
                if (!avx512) {
                    mvf = linker.downcallHandle(find(lookup, "decodiff_matvec_f32_avx2"),
                            FunctionDescriptor.ofVoid(ADDRESS, JAVA_LONG, JAVA_INT, JAVA_INT, ADDRESS, ADDRESS), critical);
                    mmf = linker.downcallHandle(find(lookup, "decodiff_matmul_f32_avx2"),
                            FunctionDescriptor.ofVoid(ADDRESS, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT, ADDRESS, ADDRESS), critical);
                }
                // The affine kernels: AVX-512 with VBMI, VNNI and F16C, or AVX2 with FMA and F16C (the same bits).
                if ((int) linker.downcallHandle(find(lookup, "decodiff_cpu_affine" + isa), FunctionDescriptor.of(JAVA_INT)).invokeExact() == 1) {
                    mvq = linker.downcallHandle(find(lookup, "decodiff_matvec_affine" + isa),
                            FunctionDescriptor.ofVoid(ADDRESS, ADDRESS, JAVA_INT, JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS, ADDRESS), critical);
                    blk = linker.downcallHandle(find(lookup, "decodiff_affine_block"),
                            FunctionDescriptor.ofVoid(ADDRESS, ADDRESS, JAVA_LONG, JAVA_LONG, JAVA_INT));
                    blkp = linker.downcallHandle(find(lookup, "decodiff_affine_block_pairs"),
                            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG, JAVA_INT));
                    mmq = linker.downcallHandle(find(lookup, "decodiff_matmul_affine" + isa),
                            FunctionDescriptor.ofVoid(ADDRESS, ADDRESS, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT, ADDRESS, ADDRESS), critical);
                }
                status = avx512 ? "native avx512 (FFM)" : "native avx2 (FFM)";
            }
            if (amxOff) amxStatus = "; AMX off (-Ddecodiff.amx=off)";
            if (avx512) {
                var critical = Linker.Option.critical(true);
                if ((int) linker.downcallHandle(find(lookup, "decodiff_cpu_bf16dot"), FunctionDescriptor.of(JAVA_INT)).invokeExact() == 1)
                    dot = linker.downcallHandle(find(lookup, "decodiff_matmul_bf16dot"),
                            FunctionDescriptor.ofVoid(ADDRESS, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT, ADDRESS, ADDRESS), critical);
                if (!amxOff) { // else amxStatus says so already
                    if ((int) linker.downcallHandle(find(lookup, "decodiff_amx_init"), FunctionDescriptor.of(JAVA_INT)).invokeExact() != 1) {
                        amxStatus = amxOnCpu() ? "; AMX refused by the OS kernel (arch_prctl)" : "";
                    } else {
                        var packing = FunctionDescriptor.ofVoid(ADDRESS, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS);
                        amx = linker.downcallHandle(find(lookup, "decodiff_matmul_amx"),
                                FunctionDescriptor.ofVoid(ADDRESS, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT, ADDRESS, ADDRESS), critical);
                        packX = linker.downcallHandle(find(lookup, "decodiff_amx_pack_x"), packing, critical);
                        packXr = linker.downcallHandle(find(lookup, "decodiff_amx_pack_xr"), packing, critical);
                        packedShorts = linker.downcallHandle(find(lookup, "decodiff_amx_packed_shorts"), FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_INT));
                        amxScratch = linker.downcallHandle(find(lookup, "decodiff_amx_scratch_shorts"), FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_INT));
                        sliceColumns = (int) linker.downcallHandle(find(lookup, "decodiff_amx_slice_columns"), FunctionDescriptor.of(JAVA_INT)).invokeExact();
                        amxLoop = linker.downcallHandle(find(lookup, "decodiff_amx_loop"), FunctionDescriptor.of(JAVA_FLOAT, JAVA_LONG));
                        amxStatus = "; prefill GEMMs on AMX tiles (exact: activations split into 3 bf16 terms)";
                    }
                }
            }
        } catch (Unavailable e) {
            status = "java (" + e.getMessage() + ")";
        } catch (Throwable t) {
            status = "java (native kernels failed to load: " + t + ")";
        }
        boolean off = "java".equalsIgnoreCase(System.getProperty("decodiff.kernels", "auto"));
        MATVEC = off ? null : mv;
        MATMUL = off ? null : mm;
        MATVEC_F32 = off ? null : mvf;
        MATMUL_F32 = off ? null : mmf;
        SCRATCH_FLOATS = scratch;
        ATTENTION_SCORES = off ? null : scores;
        ATTENTION_VALUES = off ? null : values;
        STREAM = off ? null : sr;
        MATMUL_BF16DOT = off ? null : dot;
        MATVEC_AFFINE = off ? null : mvq;
        MATMUL_AFFINE = off ? null : mmq;
        AFFINE_BLOCK = off ? null : blk;
        AFFINE_BLOCK_PAIRS = off ? null : blkp;
        MATMUL_AMX = off ? null : amx;
        AMX_PACK_X = packX;
        AMX_PACK_XR = packXr;
        AMX_PACKED_SHORTS = packedShorts;
        AMX_SCRATCH_SHORTS = amxScratch;
        AMX_LOOP = off ? null : amxLoop;
        AMX_SLICE_COLUMNS = sliceColumns;
        STATUS = off && mv != null ? "java (-Ddecodiff.kernels=java)" : status + amxStatus;
    }

    private NativeKernels() {}

    /** Whether attention's loops over f32 cache rows run natively (VectorMath then calls them; same bits). */
    static boolean attentionAvailable() { return ATTENTION_SCORES != null; }

    /**
     * scores[s0 + h·stride + i] = q_h · (row i of k) for keys i &lt; n, row i at k[ko[ko0 + i] ..], q_h at q[q0 .. q3]
     * (spare heads repeat the last; only the first {@code heads} are stored): VectorMath.dotsRange's contract.
     */
    static void attentionScores(float[] q, int q0, int q1, int q2, int q3, int heads, float[] k, int[] ko, int ko0, int n, int d,
                                float[] scores, int s0, int stride) {
        try {
            ATTENTION_SCORES.invokeExact(MemorySegment.ofArray(q), q0, q1, q2, q3, heads, MemorySegment.ofArray(k),
                    MemorySegment.ofArray(ko).asSlice(4L * ko0), n, d, MemorySegment.ofArray(scores), s0, stride);
        } catch (Throwable t) {
            throw new IllegalStateException("native attention scores failed", t);
        }
    }

    /**
     * Columns [0, c2) of four heads' outputs out[u<h> ..] += p[p<h> + i] · (row i of v) for rows i in [i0, i1), row i at
     * v[vo[i] ..], in row order: VectorMath.accumulateF32's contract.
     */
    static void attentionValues(float[] p, int p0, int p1, int p2, int p3, float[] v, int[] vo, int i0, int i1, int c2,
                                float[] out, int u0, int u1, int u2, int u3) {
        try {
            ATTENTION_VALUES.invokeExact(MemorySegment.ofArray(p), p0, p1, p2, p3, MemorySegment.ofArray(v), MemorySegment.ofArray(vo), i0, i1, c2,
                    MemorySegment.ofArray(out), u0, u1, u2, u3);
        } catch (Throwable t) {
            throw new IllegalStateException("native attention values failed", t);
        }
    }

    /** Whether bf16 matrices run on the native kernels. */
    public static boolean available() { return MATVEC != null; }

    /** Which kernels run, and why not the native ones when they don't: for bench and --version output. */
    public static String status() { return STATUS; }

    /** Whether this build should have native kernels on this machine (Linux x86-64 with AVX-512, or AVX2 and FMA): tests hold it to that. */
    public static boolean expectedHere() {
        if (!linuxX86()) return false;
        try {
            for (String line : Files.readAllLines(Path.of("/proc/cpuinfo")))
                if (line.startsWith("flags")) {
                    String flags = line + " ";
                    return flags.contains(" avx512f ") || flags.contains(" avx2 ") && flags.contains(" fma ");
                }
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

    /** Whether fp32 matrices run on the native kernels (the AVX2 ones: on AVX-512 the Java kernels run at the CPU's width). */
    public static boolean f32Available() { return MATVEC_F32 != null; }

    /** As {@link #matvecBf16} on fp32 weights ({@link #f32Available()} must hold). */
    static void matvecF32(MemorySegment w, int cols, int from, int to, MemorySegment x, MemorySegment y) {
        try {
            MATVEC_F32.invokeExact(w, (long) cols, from, to, x, y);
        } catch (Throwable t) {
            throw new IllegalStateException("native f32 matvec failed", t);
        }
    }

    /** As {@link #matmulBf16} on fp32 weights ({@link #f32Available()} must hold). */
    static void matmulF32(MemorySegment w, int cols, int rows, int from, int to, MemorySegment x, int tokens, MemorySegment y, MemorySegment scratch) {
        try {
            MATMUL_F32.invokeExact(w, (long) cols, rows, from, to, x, tokens, y, scratch);
        } catch (Throwable t) {
            throw new IllegalStateException("native f32 matmul failed", t);
        }
    }

    /**
     * Whether MLX affine 4- and 8-bit matrices run packed on the native kernels here (AVX-512 with VBMI, VNNI and F16C, or
     * AVX2 with FMA and F16C); where they cannot, the loader dequantizes them to fp32 instead.
     */
    public static boolean affineAvailable() { return MATVEC_AFFINE != null; }

    /** y[r] = W[r]·x for r in [from, to) of a [rows, cols] affine matrix: blocked codes, (scale, bias) pairs of {@code pairType}, as decodiff_kernels.c says. */
    static void matvecAffine(MemorySegment codes, MemorySegment pairs, int pairType, int bits, int rows, int cols, int group, int from, int to,
                             MemorySegment x, MemorySegment y) {
        try {
            MATVEC_AFFINE.invokeExact(codes, pairs, pairType, bits, (long) rows, (long) cols, group, from, to, x, y);
        } catch (Throwable t) {
            throw new IllegalStateException("native affine matvec failed", t);
        }
    }

    /** MLX's row-major codes of a [rows, cols] matrix blocked into {@code out} (the layout {@link AffineGroups} describes). */
    static void affineBlock(MemorySegment stored, MemorySegment out, int rows, int cols, int bits) {
        try {
            AFFINE_BLOCK.invokeExact(stored, out, (long) rows, (long) cols, bits);
        } catch (Throwable t) {
            throw new IllegalStateException("native affine blocking failed", t);
        }
    }

    /** An affine matrix's (scale, bias) pairs, {@code bytes} each, in MLX's order, blocked in place (as {@link AffineGroups} says). */
    static void affineBlockPairs(MemorySegment pairs, int rows, int groups, int bytes) {
        int done;
        try {
            done = (int) AFFINE_BLOCK_PAIRS.invokeExact(pairs, (long) rows, (long) groups, bytes);
        } catch (Throwable t) {
            throw new IllegalStateException("native affine pair blocking failed", t);
        }
        if (done != 1) throw new OutOfMemoryError("no memory to block " + rows + " rows of affine scales and biases");
    }

    /** As {@link #matmulBf16} on an affine matrix (scratch from {@link #matmulScratch}). */
    static void matmulAffine(MemorySegment codes, MemorySegment pairs, int pairType, int bits, int group, int cols, int rows, int from, int to,
                             MemorySegment x, int tokens, MemorySegment y, MemorySegment scratch) {
        try {
            MATMUL_AFFINE.invokeExact(codes, pairs, pairType, bits, group, (long) cols, rows, from, to, x, tokens, y, scratch);
        } catch (Throwable t) {
            throw new IllegalStateException("native affine matmul failed", t);
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

    /**
     * Whether exact prefill GEMMs run on AMX tiles here: the CPU has AMX-TILE and AMX-BF16, the OS kernel granted this
     * process the tile state (asked once, at class load), and {@code -Ddecodiff.amx=off} is not set.
     */
    public static boolean amxAvailable() { return MATMUL_AMX != null; }

    /** Whether /proc/cpuinfo lists AMX bf16 tiles (whatever the OS kernel allows). */
    public static boolean amxOnCpu() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/cpuinfo")))
                if (line.startsWith("flags")) return (line + " ").contains(" amx_bf16 ") && (line + " ").contains(" amx_tile ");
        } catch (IOException e) {
            return false;
        }
        return false;
    }

    /** Shorts of packed activations {@link #amxPack} writes for {@code tokens} tokens of {@code cols} columns with {@code terms} terms. */
    static long amxPackedShorts(int cols, int tokens, int terms) {
        try {
            return (long) AMX_PACKED_SHORTS.invokeExact((long) cols, tokens, terms);
        } catch (Throwable t) {
            throw new IllegalStateException("native AMX size failed", t);
        }
    }

    /**
     * Token tiles [tileFrom, tileTo) (16 tokens each) of fp32 X ([tokens, cols]) packed as the AMX GEMM reads them:
     * split exactly into three bf16 terms, or ({@code rounded}) rounded to bf16 to nearest even as one.
     */
    static void amxPack(MemorySegment x, boolean rounded, int cols, int tokens, int tileFrom, int tileTo, MemorySegment packed) {
        try {
            if (rounded) AMX_PACK_XR.invokeExact(x, (long) cols, tokens, tileFrom, tileTo, packed);
            else AMX_PACK_X.invokeExact(x, (long) cols, tokens, tileFrom, tileTo, packed);
        } catch (Throwable t) {
            throw new IllegalStateException("native AMX pack failed", t);
        }
    }

    /** Y[t·rows + r] = W[r]·X[t] for r in [from, to), t < tokens, on AMX tiles, from activations packed by {@link #amxPack}. */
    static void matmulAmx(MemorySegment w, int cols, int rows, int from, int to, MemorySegment packed, int terms, int tokens, MemorySegment y) {
        long shorts;
        try {
            shorts = (long) AMX_SCRATCH_SHORTS.invokeExact((long) cols, to - from, tokens);
        } catch (Throwable t) {
            throw new IllegalStateException("native AMX scratch size failed", t);
        }
        var scratch = AMX_SCRATCH.get();
        if (scratch == null || scratch.byteSize() < shorts * 2) {
            scratch = Arena.ofAuto().allocate(shorts * 2, 64);
            AMX_SCRATCH.set(scratch);
        }
        try {
            MATMUL_AMX.invokeExact(w, (long) cols, rows, from, to, packed, terms, tokens, y, scratch);
        } catch (Throwable t) {
            throw new IllegalStateException("native AMX matmul failed", t);
        }
    }

    /** Columns the AMX GEMM multiplies at a time (a K slice): its token chunks are sized to keep a slice's activations in L2. */
    static int amxSliceColumns() { return AMX_SLICE_COLUMNS; }

    /** The AMX bf16 peak loop: {@code iterations} rounds of four independent 16 × 32 × 16 tile products; returns a checksum. */
    public static float amxLoop(long iterations) {
        if (AMX_LOOP == null) throw new IllegalStateException("AMX is not in use: " + STATUS);
        try {
            return (float) AMX_LOOP.invokeExact(iterations);
        } catch (Throwable t) {
            throw new IllegalStateException("native AMX loop failed", t);
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
