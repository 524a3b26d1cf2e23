package dev.decodiff.metal;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.Objects;

/**
 * A row-major [rows, cols] weight matrix in its stored dtype (usually a memory-mapped view), multiplied
 * against fp32 activations with fp32 accumulation: y = x·Wᵀ, the convention of torch's Linear.
 *
 * <p>With {@code affine} set, {@code data} holds MLX affine codes (dtype U32, blocked as {@link AffineGroups} says) and
 * {@code affine} their per-group scales and biases. The GEMM and the Java kernels read element (r, c) as the fp32 value
 * fl(fl(scale·q) + bias), dequantized in registers, so their results have the bits of the same kernels over the
 * dequantized fp32 matrix; the native matvec (decode) sums each group's codes times the activations exactly in
 * integers (decodiff_kernels.c says how), closer to the exact dot product than the fp32 chain, not the same bits.
 */
public record WeightMatrix(String name, DType dtype, int rows, int cols, MemorySegment data, AffineGroups affine) {
    public WeightMatrix {
        // The native kernels trust these sizes: a short segment must fail here, not read past its end.
        if (affine == null ? rows < 0 || cols < 0 || data.byteSize() < (long) rows * cols * dtype.bytes()
                : rows < 0 || cols < 0 || dtype != DType.U32 || cols % affine.groupSize() != 0 || data.byteSize() < rows * affine.rowBytes(cols)
                || affine.pairs().byteSize() < rows * affine.pairRowBytes(cols))
            throw new IllegalArgumentException("tensor '" + name + "': " + data.byteSize() + " bytes cannot hold [" + rows + ", " + cols + "] "
                    + (affine == null ? dtype : affine.bits() + "-bit codes in groups of " + affine.groupSize() + " with " + affine.pairs().byteSize() + " bytes of scales and biases"));
    }

    public WeightMatrix(String name, DType dtype, int rows, int cols, MemorySegment data) {
        this(name, dtype, rows, cols, data, null);
    }

    /**
     * An MLX affine matrix from its codes as the checkpoint stores them (row-major), blocked into {@code into} (at least
     * {@code rows · cols · bits / 8} bytes), and {@code affine}'s pairs (in MLX's order) blocked in place: once per pairs.
     */
    public static WeightMatrix affine(String name, int rows, int cols, MemorySegment stored, AffineGroups affine, MemorySegment into) {
        long bytes = rows * affine.rowBytes(cols);
        var blocked = into.asSlice(0, bytes);
        affine.block(stored, rows, cols, blocked);
        return new WeightMatrix(name, DType.U32, rows, cols, blocked, affine);
    }

    /**
     * An MLX affine matrix read where it is stored, codes and pairs in MLX's order: for a table looked up a row at a time
     * (E2B's per-layer embeddings), which no kernel streams — products over it take the Java kernels.
     */
    public static WeightMatrix affineAsStored(String name, int rows, int cols, MemorySegment stored, AffineGroups affine) {
        return new WeightMatrix(name, DType.U32, rows, cols, stored, affine.stored());
    }

    /** {@link #affine(String, int, int, MemorySegment, AffineGroups, MemorySegment)} into memory of its own. */
    public static WeightMatrix affine(String name, int rows, int cols, MemorySegment stored, AffineGroups affine) {
        return affine(name, rows, cols, stored, affine, Arena.ofAuto().allocate(Math.max(1, rows * affine.rowBytes(cols)), 64));
    }

    /** Whether this matrix holds affine codes (see the class comment). */
    public boolean packed() { return affine != null; }

    /** The same matrix reading its codes or elements from {@code data} (a copy of {@link #dataBytes()} bytes). */
    public WeightMatrix withData(MemorySegment data) {
        return new WeightMatrix(name, dtype, rows, cols, data, affine);
    }

    private static final VectorSpecies<Float> F = FloatVector.SPECIES_512;
    private static final VectorSpecies<Short> S = ShortVector.SPECIES_256;
    private static final VectorSpecies<Integer> I = IntVector.SPECIES_512;
    private static final int L = F.length();
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(LE);
    private static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(LE);
    /** Tokens whose dot products share one pass over a weight row in {@link #matmul}. */
    private static final int TOKEN_BLOCK = 4;
    /** Rows whose dot products share one pass over the activations. */
    private static final int ROW_BLOCK = 4;
    /** Tokens of one register tile of {@link #matmul} (4 rows × 6 tokens: 24 accumulators of the 32 vector registers). */
    private static final int TILE_TOKENS = 6;
    /** Bytes of activations one token chunk of {@link #matmul} may span, to stay in a core's L2. */
    private static final int ACTIVATION_BUDGET = Integer.getInteger("decodiff.actBudget", 1024 * 1024);
    /**
     * The fewest tokens per chunk of the native GEMM, however wide the rows: it widens each block of weight rows once
     * per chunk and reads the activations a column block at a time, so a wide matrix gains more from sharing the
     * widening than from keeping all its activations in L2 (one thread, CPU time, fraction of the FMA peak at 18 / 42 /
     * 84 tokens per chunk: 12288 columns 0.67 / 0.77 / 0.71; 21504 columns, 12 / 42 / 84: 0.54 / 0.74 / 0.67).
     */
    private static final int NATIVE_MIN_CHUNK = 7 * TILE_TOKENS;
    /**
     * Decode's matvec gives each thread one large piece of rows and shares the last sixteenth in shrinking pieces
     * ({@link Parallel#forRangeInHalves}); -Ddecodiff.matvecSplit=guided (shrinking pieces throughout) or uniform
     * (four equal pieces per thread) restore earlier splits, for comparing them.
     */
    private static final String MATVEC_SPLIT = System.getProperty("decodiff.matvecSplit", "halves");
    /** Tokens (and weight rows) of one AMX tile. */
    private static final int AMX_TILE = 16;
    /**
     * Bytes of packed activations of one K slice (1536 columns) one token chunk of the AMX GEMM may span (at least 32
     * tokens): they stay in a core's L2 while each 32-row group of weights passes over them. 1 MB (96 tokens of three
     * terms) measured 2.6-2.9 × the FMA GEMM on 6144 × 1536 and 1536 × 6144 weights with 512 tokens, 2 MB 2.3-2.5 ×
     * (one thread, CPU time).
     */
    private static final int AMX_BUDGET = Integer.getInteger("decodiff.amxBudget", 1024 * 1024);
    private static final ThreadLocal<MemorySegment> AMX_PACKED = new ThreadLocal<>();
    /** Columns of one block of {@link #matmul}: a widened 4-row tile and a 6-token tile of this width stay in L1. */
    private static final int COL_BLOCK = Integer.getInteger("decodiff.colBlock", 512);

    public static WeightMatrix of(TensorView t) {
        if (t.rank() != 2) throw new IllegalArgumentException("tensor '" + t.name() + "' must be 2-D, is " + t.shapeString());
        return of(t, (int) t.dim(0), (int) t.dim(1));
    }

    public static WeightMatrix of(TensorView t, int rows, int cols) {
        if ((long) rows * cols != t.elementCount())
            throw new IllegalArgumentException("tensor '" + t.name() + "' " + t.shapeString() + " is not [" + rows + ", " + cols + "]");
        if (!t.dtype().isFloat()) throw new IllegalArgumentException("tensor '" + t.name() + "' has dtype " + t.dtype());
        return new WeightMatrix(t.name(), t.dtype(), rows, cols, t.data());
    }

    /** The [rows, cols] matrix stored at rows [rowStart, rowStart+rows) of this one (e.g. one expert of a stacked tensor). */
    public WeightMatrix slice(int rowStart, int nRows) {
        if (affine != null && !affine.asStored()) {
            int seg = affine.segment(rows);
            if (rowStart % seg != 0 || nRows % seg != 0)
                throw new IllegalArgumentException("tensor '" + name + "': rows [" + rowStart + ", " + (rowStart + nRows) + ") cut its " + seg
                        + "-row blocked segments; affine matrices slice on whole segments");
        }
        long rowBytes = affine != null ? affine.rowBytes(cols) : (long) cols * dtype.bytes();
        return new WeightMatrix(name + "[" + rowStart + ":" + (rowStart + nRows) + "]", dtype, nRows, cols,
                data.asSlice(rowStart * rowBytes, nRows * rowBytes), affine == null ? null : affine.slice(cols, rowStart, nRows));
    }

    /** Bytes one pass over the matrix reads: its elements, or its codes plus their scales and biases. */
    public long bytes() { return affine == null ? dataBytes() : dataBytes() + rows * affine.pairRowBytes(cols); }

    /** Bytes of {@link #data()} the matrix spans: its elements, or its codes. */
    public long dataBytes() { return affine == null ? (long) rows * cols * dtype.bytes() : rows * affine.rowBytes(cols); }

    /** Whether the native kernels take this matrix (bf16, or affine codes where the CPU has the affine kernels). */
    private boolean nativeKernel() {
        if (affine != null) return NativeKernels.affineAvailable() && affine.oneLayout(rows);
        return dtype == DType.BF16 ? NativeKernels.available() : dtype == DType.F32 && NativeKernels.f32Available();
    }

    /** Rows [from, to) of the native matvec. */
    private void nativeRows(MemorySegment xs, MemorySegment ys, int from, int to) {
        if (affine != null)
            NativeKernels.matvecAffine(data, affine.pairs(), affine.nativeType(), affine.bits(), rows, cols, affine.groupSize(), from, to, xs, ys);
        else if (dtype == DType.F32) NativeKernels.matvecF32(data, cols, from, to, xs, ys);
        else NativeKernels.matvecBf16(data, cols, from, to, xs, ys);
    }

    /**
     * For a table read a row at a time from a file mapping (a lookup, not a stream): the kernel is told to read each
     * fault's own page only ({@link MappedPages#random}), and, when {@code rows} is given, to start reading those rows
     * now ({@link MappedPages#willNeed}), so a prompt's lookups wait for the rows they read and no more. Advice only.
     */
    public void adviseLookups(int[] rows) {
        if (!data.isMapped()) return;
        if (rows == null) {
            MappedPages.random(data);
            return;
        }
        long rowBytes = affine != null ? affine.rowBytes(cols) : (long) cols * dtype.bytes(); // a packed table is read as stored
        for (int r : rows) if (r >= 0 && r < this.rows) MappedPages.willNeed(data.asSlice(r * rowBytes, rowBytes));
    }

    /** y[yOff + r] = W[r]·x[xOff ..] for every row r. */
    public void matvec(float[] x, int xOff, float[] y, int yOff) {
        if (nativeKernel()) matvecNative(x, xOff, y, yOff);
        else matvecJava(x, xOff, y, yOff);
    }

    /** {@link #matvec} on the Java kernels, whatever the machine has (tests and benchmarks compare the paths). */
    public void matvecJava(float[] x, int xOff, float[] y, int yOff) {
        Objects.checkFromIndexSize(xOff, cols, x.length);
        Objects.checkFromIndexSize(yOff, rows, y.length);
        Parallel.forRange(rows, 64, (from, to) -> matvecRows(x, xOff, y, yOff, from, to));
    }

    /** {@link #matvec} on the native kernels (bf16, f32 where {@link NativeKernels#f32Available()}, packed affine codes). */
    public void matvecNative(float[] x, int xOff, float[] y, int yOff) {
        requireNative();
        Objects.checkFromIndexSize(xOff, cols, x.length);
        Objects.checkFromIndexSize(yOff, rows, y.length);
        var xs = MemorySegment.ofArray(x).asSlice(xOff * 4L, cols * 4L);
        var ys = MemorySegment.ofArray(y).asSlice(yOff * 4L, rows * 4L);
        decodeRows(rows, 64, (from, to) -> nativeRows(xs, ys, from, to));
    }

    /**
     * ys[i] = ms[i]·x for matrices with the same columns (decode's q, k and v projections, which read the same
     * activations) as one parallel call over all their rows: one fork, one join and one tail instead of one each. Each
     * output gets the bits {@link #matvec} gives it; {@link #canShareMatvec} must hold for every pair.
     */
    public static void matvecAll(WeightMatrix[] ms, float[] x, float[][] ys) {
        int grain = 64;
        int[] start = new int[ms.length + 1];
        var outs = new MemorySegment[ms.length];
        for (int i = 0; i < ms.length; i++) {
            if (!canShareMatvec(ms[0], ms[i])) throw new IllegalStateException("'" + ms[0].name + "' and '" + ms[i].name + "' cannot share a native matvec");
            Objects.checkFromIndexSize(0, ms[i].rows, ys[i].length);
            outs[i] = MemorySegment.ofArray(ys[i]).asSlice(0, ms[i].rows * 4L);
            // each matrix's rows are numbered from the first multiple of the grain after the previous one's
            start[i + 1] = start[i] + (ms[i].rows + grain - 1) / grain * grain;
        }
        Objects.checkFromIndexSize(0, ms[0].cols, x.length);
        var xs = MemorySegment.ofArray(x).asSlice(0, ms[0].cols * 4L);
        decodeRows(start[ms.length], grain, (from, to) -> {
            for (int i = 0; i < ms.length; i++) {
                int lo = Math.max(from, start[i]) - start[i], hi = Math.min(to - start[i], ms[i].rows);
                if (lo < hi) ms[i].nativeRows(xs, outs[i], lo, hi);
            }
        });
    }

    /**
     * ya = a·x and yb = b·x (matrices of the same shape: decode's gate and up), then {@code after.run(from, to)} on
     * each piece of rows as soon as both outputs of those rows are computed, on the thread that computed them: an
     * element-wise op on the two outputs (the gated activation) runs while they are in cache and costs no parallel
     * call of its own. Each output gets the bits {@link #matvec} gives it ({@link #canShareMatvec} must hold).
     */
    public static void matvecPaired(WeightMatrix a, WeightMatrix b, float[] x, float[] ya, float[] yb, Parallel.RangeBody after) {
        if (!canShareMatvec(a, b) || a.rows != b.rows) throw new IllegalStateException("'" + a.name + "' and '" + b.name + "' cannot share a native matvec");
        Objects.checkFromIndexSize(0, a.cols, x.length);
        Objects.checkFromIndexSize(0, a.rows, ya.length);
        Objects.checkFromIndexSize(0, b.rows, yb.length);
        var xs = MemorySegment.ofArray(x).asSlice(0, a.cols * 4L);
        var as = MemorySegment.ofArray(ya).asSlice(0, a.rows * 4L);
        var bs = MemorySegment.ofArray(yb).asSlice(0, b.rows * 4L);
        // each row index reads a row of both matrices: half the grain of a single matvec's
        decodeRows(a.rows, 32, (from, to) -> {
            a.nativeRows(xs, as, from, to);
            b.nativeRows(xs, bs, from, to);
            after.run(from, to);
        });
    }

    /**
     * {@link #matvec} (native kernels: {@link #canShareMatvec} of this with itself), then {@code after.run(from, to)}
     * on each piece of output rows [from, to) right after it is computed, on the thread that computed it (an
     * element-wise op on the output, such as the logit soft-cap, then needs no pass of its own over memory).
     */
    public void matvecThen(float[] x, int xOff, float[] y, Parallel.RangeBody after) {
        requireNative();
        Objects.checkFromIndexSize(xOff, cols, x.length);
        Objects.checkFromIndexSize(0, rows, y.length);
        var xs = MemorySegment.ofArray(x).asSlice(xOff * 4L, cols * 4L);
        var ys = MemorySegment.ofArray(y).asSlice(0, rows * 4L);
        Parallel.RangeBody body = (from, to) -> {
            nativeRows(xs, ys, from, to);
            after.run(from, to);
        };
        decodeRows(rows, 64, body);
    }

    /** How decode's matvecs split their rows over the threads (-Ddecodiff.matvecSplit: halves, guided, uniform). */
    private static void decodeRows(int n, int grain, Parallel.RangeBody body) {
        switch (MATVEC_SPLIT) {
            case "guided" -> Parallel.forRangeGuided(n, grain, body);
            case "uniform" -> Parallel.forRange(n, grain, body);
            default -> Parallel.forRangeInHalves(n, grain, body);
        }
    }

    /** Whether {@link #matvecThen} can take this matrix. */
    public boolean canMatvecThen() { return nativeKernel(); }

    /** Whether {@link #matvecAll} and {@link #matvecPaired} can take a and b together. */
    public static boolean canShareMatvec(WeightMatrix a, WeightMatrix b) {
        return a.nativeKernel() && b.nativeKernel() && a.cols == b.cols;
    }


    /**
     * Rows [from, to) of {@link #matvec}, four at a time: four independent FMA chains hide the FMA latency that a
     * single chain is bound by, and each activation vector is loaded once for four rows. Every row keeps its own
     * accumulator in lane order, so each y[r] is bit-identical to {@link #dot}.
     */
    private void matvecRows(float[] x, int xOff, float[] y, int yOff, int from, int to) {
        float[] lanes = new float[L];
        int r = from;
        if (dtype != DType.F16) for (; r + ROW_BLOCK <= to; r += ROW_BLOCK) rows4(r, x, xOff, y, yOff + r, lanes);
        for (; r < to; r++) y[yOff + r] = dot(r, x, xOff);
    }

    /**
     * Y[t, r] = W[r]·X[t] for t < tokens; X is [tokens, cols], Y is [tokens, rows], both row-major.
     *
     * <p>A blocked GEMM: each thread takes a range of rows; tokens are taken in chunks whose activations fit in L2,
     * and the columns in blocks of {@link #COL_BLOCK} so that one widened weight tile (4 rows × a column block) and
     * one token tile (6 tokens × a column block) stay in L1 together. Inside a column block, four weight rows are
     * widened to fp32 once into a small scratch (bf16 widening would otherwise take the FMA ports in the inner loop)
     * and a 4-row × 6-token tile keeps 24 accumulators in registers, so each weight vector serves six tokens and each
     * activation vector four rows. The accumulator <em>vectors</em> are carried from one column block to the next in
     * a scratch (16 lanes per (row, token)), so every (t, r) still has one accumulator over the columns in order,
     * reduced at the end: results are bit-identical to {@link #dot} and to {@link #matvec} (prefill equals decode).
     */
    public void matmul(float[] x, int tokens, float[] y) {
        if (tokens > 1 && dtype == DType.BF16 && NativeKernels.amxAvailable()) matmulAmx(x, tokens, y);
        else matmulFma(x, tokens, y);
    }

    /**
     * {@link #matmul} on the FMA kernels only (never AMX tiles): every (t, r) gets the bits of {@link #dot}, so a
     * prefill gives each token the bits of decoding it alone ({@link MatmulPrecision#FP32_FMA}) — but on packed
     * affine weights, whose native matvec sums in integers (see the class comment).
     */
    public void matmulFma(float[] x, int tokens, float[] y) {
        if (tokens == 1) matvec(x, 0, y, 0);
        else if (nativeKernel()) matmulNative(x, tokens, y);
        else matmulJava(x, tokens, y);
    }

    /**
     * {@link #matmul} on AMX tiles (bf16 only; {@link NativeKernels#amxAvailable()} must hold): each activation split
     * exactly into three bf16 terms, the weight times each term an exact product, all of them summed in fp32 tile
     * accumulators (decodiff_kernels.c says how). As exact as the FMA GEMM up to the order of the fp32 sums, so not
     * its bits; every token's result is independent of the others in the call.
     */
    public void matmulAmx(float[] x, int tokens, float[] y) {
        requireAmx();
        Objects.checkFromIndexSize(0, tokens * cols, x.length);
        Objects.checkFromIndexSize(0, tokens * rows, y.length);
        amxChunks(MemorySegment.ofArray(x), false, tokens, y);
    }

    private void requireAmx() {
        requireNative();
        if (!NativeKernels.amxAvailable()) throw new IllegalStateException("AMX tiles are not in use: " + NativeKernels.status());
    }

    /**
     * The AMX GEMM in token chunks whose packed activations ({@code terms} bf16 values per element) of one K slice
     * stay within {@link #AMX_BUDGET}: each chunk's activations packed once (the token tiles shared out over the
     * cores), then the rows shared out, 32 at a time.
     */
    private void amxChunks(MemorySegment xs, boolean rounded, int tokens, float[] y) {
        int terms = rounded ? 1 : 3, elementBytes = 4;
        int slice = Math.min(cols, NativeKernels.amxSliceColumns());
        int chunk = Math.min(tokens, Math.max(2 * AMX_TILE, AMX_BUDGET / (slice * 2 * terms) / (2 * AMX_TILE) * (2 * AMX_TILE)));
        var packed = amxPacked(NativeKernels.amxPackedShorts(cols, chunk, terms) * 2);
        var ys = MemorySegment.ofArray(y);
        for (int t0 = 0; t0 < tokens; t0 += chunk) {
            int n = Math.min(chunk, tokens - t0);
            var xc = xs.asSlice((long) t0 * cols * elementBytes, (long) n * cols * elementBytes);
            var yc = ys.asSlice((long) t0 * rows * 4, (long) n * rows * 4);
            Parallel.forRange((n + AMX_TILE - 1) / AMX_TILE, 1, (a, b) -> NativeKernels.amxPack(xc, rounded, cols, n, a, b, packed));
            Parallel.forRange(rows, 2 * AMX_TILE, (from, to) -> NativeKernels.matmulAmx(data, cols, rows, from, to, packed, terms, n, yc));
        }
    }

    /** The calling thread's buffer for packed activations (the workers of its calls write and read it), grown as needed. */
    private static MemorySegment amxPacked(long bytes) {
        var buf = AMX_PACKED.get();
        if (buf == null || buf.byteSize() < bytes) {
            buf = Arena.ofAuto().allocate(bytes, 64);
            AMX_PACKED.set(buf);
        }
        return buf;
    }

    private void requireNative() {
        if (affine != null) {
            if (!NativeKernels.affineAvailable()) throw new IllegalStateException("native affine kernels are not in use: " + NativeKernels.status());
            if (affine.asStored()) throw new IllegalStateException("tensor '" + name + "' is a table kept as stored, for row lookups; the native kernels read blocked codes");
            if (!affine.oneLayout(rows))
                throw new IllegalStateException("tensor '" + name + "' is a stack of " + affine.segment(rows) + "-row segments; slice it into them first");
            return;
        }
        if (dtype == DType.F32 && NativeKernels.f32Available()) return;
        if (dtype != DType.BF16) throw new IllegalStateException("native kernels take bf16 weights (and f32 on AVX2), '" + name + "' is " + dtype);
        if (!NativeKernels.available()) throw new IllegalStateException("native kernels are not in use: " + NativeKernels.status());
    }

    /** Tokens per chunk of {@link #matmul}: their activations stay in a core's L2 while every row passes over them. */
    private int tokenChunk(int tokens) {
        return Math.max(TILE_TOKENS, Math.min(tokens, (ACTIVATION_BUDGET / (cols * 4)) / TILE_TOKENS * TILE_TOKENS));
    }

    /** {@link #matmul} on the native kernels (bf16 only): the same blocking and token chunks, in C. */
    public void matmulNative(float[] x, int tokens, float[] y) {
        requireNative();
        Objects.checkFromIndexSize(0, tokens * cols, x.length);
        Objects.checkFromIndexSize(0, tokens * rows, y.length);
        if (affine != null) {
            var a = affine;
            nativeChunks(MemorySegment.ofArray(x), 4, tokens, y, (w, c, n, from, to, xs, t, ys, scratch) ->
                    NativeKernels.matmulAffine(w, a.pairs(), a.nativeType(), a.bits(), a.groupSize(), c, n, from, to, xs, t, ys, scratch));
        } else nativeChunks(MemorySegment.ofArray(x), 4, tokens, y, dtype == DType.F32 ? NativeKernels::matmulF32 : NativeKernels::matmulBf16);
    }

    /** One native GEMM over rows [from, to) of a token chunk (x: the chunk's activations, y: its outputs). */
    private interface NativeGemm {
        void run(MemorySegment w, int cols, int rows, int from, int to, MemorySegment x, int tokens, MemorySegment y, MemorySegment scratch);
    }

    /**
     * Rows split over the cores, tokens in chunks whose activations ({@code elementBytes} each) stay in L2, or of
     * {@link #NATIVE_MIN_CHUNK} tokens for rows too wide for that.
     */
    private void nativeChunks(MemorySegment xs, int elementBytes, int tokens, float[] y, NativeGemm gemm) {
        int chunk = Math.max(tokenChunk(tokens), Math.min(tokens, NATIVE_MIN_CHUNK));
        var ys = MemorySegment.ofArray(y);
        Parallel.forRange(rows, 16, (from, to) -> {
            var scratch = NativeKernels.matmulScratch(cols, Math.min(chunk, tokens));
            for (int t0 = 0; t0 < tokens; t0 += chunk) {
                int n = Math.min(chunk, tokens - t0);
                gemm.run(data, cols, rows, from, to, xs.asSlice((long) t0 * cols * elementBytes, (long) n * cols * elementBytes), n,
                        ys.asSlice((long) t0 * rows * 4, (long) n * rows * 4), scratch);
            }
        });
    }

    /**
     * {@link #matmul} at the given precision. {@link MatmulPrecision#BF16} on bf16 weights rounds the activations to
     * bf16 (nearest even) and multiplies with AVX512-BF16 dot products where the CPU has them, else with the fp32
     * kernels on the rounded activations (the products of two bf16 values are exact in fp32 either way; the sums
     * differ in order only). Other weights, and {@link MatmulPrecision#FP32}, take the exact path.
     */
    public void matmul(float[] x, int tokens, float[] y, MatmulPrecision precision) {
        if (precision == MatmulPrecision.FP32 || dtype != DType.BF16) {
            matmul(x, tokens, y);
            return;
        }
        if (precision == MatmulPrecision.FP32_FMA) {
            matmulFma(x, tokens, y);
            return;
        }
        Objects.checkFromIndexSize(0, tokens * cols, x.length);
        Objects.checkFromIndexSize(0, tokens * rows, y.length);
        if (tokens > 1 && NativeKernels.amxAvailable()) {
            amxChunks(MemorySegment.ofArray(x), true, tokens, y); // rounded as BFloat16.round does, while packed
            return;
        }
        short[] xb = BFloat16.round(x, 0, tokens * cols);
        if (NativeKernels.bf16DotAvailable()) {
            nativeChunks(MemorySegment.ofArray(xb), 2, tokens, y, NativeKernels::matmulBf16Dot);
            return;
        }
        float[] rounded = new float[xb.length];
        for (int i = 0; i < xb.length; i++) rounded[i] = BFloat16.widen(xb[i]);
        matmul(rounded, tokens, y);
    }

    /**
     * {@link #matmul(float[], int, float[], MatmulPrecision)} whose kernel does not depend on how many tokens come:
     * where a multi-token call runs on AMX tiles, a single token does too, so each token gets the bits any
     * multi-token call gives it (an expert that a prefill routes one token to, beside experts routed many).
     */
    public void matmulAnyTokens(float[] x, int tokens, float[] y, MatmulPrecision precision) {
        boolean amx = tokens == 1 && dtype == DType.BF16 && precision != MatmulPrecision.FP32_FMA && NativeKernels.amxAvailable();
        if (!amx) {
            matmul(x, tokens, y, precision);
            return;
        }
        Objects.checkFromIndexSize(0, cols, x.length);
        Objects.checkFromIndexSize(0, rows, y.length);
        amxChunks(MemorySegment.ofArray(x), precision == MatmulPrecision.BF16, 1, y);
    }

    /** {@link #matvec} at the given precision, as {@link #matmul(float[], int, float[], MatmulPrecision)}. */
    public void matvec(float[] x, int xOff, float[] y, int yOff, MatmulPrecision precision) {
        if (precision != MatmulPrecision.BF16 || dtype != DType.BF16) {
            matvec(x, xOff, y, yOff);
            return;
        }
        float[] out = yOff == 0 ? y : new float[rows];
        matmul(java.util.Arrays.copyOfRange(x, xOff, xOff + cols), 1, out, precision);
        if (out != y) System.arraycopy(out, 0, y, yOff, rows);
    }

    /** {@link #matmul} on the Java kernels, whatever the machine has (tests and benchmarks compare the paths). */
    public void matmulJava(float[] x, int tokens, float[] y) {
        Objects.checkFromIndexSize(0, tokens * cols, x.length);
        Objects.checkFromIndexSize(0, tokens * rows, y.length);
        if (tokens == 1) {
            matvecJava(x, 0, y, 0);
            return;
        }
        int chunk = tokenChunk(tokens);
        int bound = cols - (cols % L);
        int kb = Math.max(L, Math.min(bound, COL_BLOCK / L * L));
        Parallel.forRange(rows, 16, (from, to) -> {
            float[] wide = dtype == DType.F16 || bound == 0 ? null : new float[ROW_BLOCK * kb];
            float[] acc = wide == null ? null : new float[Math.min(chunk, tokens) * ROW_BLOCK * L];
            for (int t0 = 0; t0 < tokens; t0 += chunk) {
                int t1 = Math.min(tokens, t0 + chunk);
                int r = from;
                if (wide != null) {
                    for (; r + ROW_BLOCK <= to; r += ROW_BLOCK) {
                        for (int c0 = 0; c0 < bound; c0 += kb) {
                            int c1 = Math.min(bound, c0 + kb);
                            widenRows(r, c0, c1, wide, kb);
                            int t = t0;
                            for (; t + TILE_TOKENS <= t1; t += TILE_TOKENS) tile4x6(wide, kb, c0, c1, x, t, acc, (t - t0) * ROW_BLOCK * L);
                            for (; t < t1; t++) wide4(wide, kb, c0, c1, x, t, acc, (t - t0) * ROW_BLOCK * L);
                        }
                        for (int t = t0; t < t1; t++) finish4(r, bound, x, t, y, acc, (t - t0) * ROW_BLOCK * L);
                    }
                }
                for (; r < to; r++) {
                    int t = t0;
                    for (; t + TOKEN_BLOCK <= t1; t += TOKEN_BLOCK) dot4(r, x, t, y);
                    for (; t < t1; t++) y[t * rows + r] = dot(r, x, t * cols);
                }
            }
        });
    }

    /** Columns [c0, c1) of rows [r, r+4) widened to fp32 into wide[i·stride ..], once per token chunk and column block. */
    private void widenRows(int r, int c0, int c1, float[] wide, int stride) {
        for (int i = 0; i < ROW_BLOCK; i++) {
            long base = (long) (r + i) * cols;
            int o = i * stride - c0;
            for (int c = c0; c < c1; c += L) load(base + c).intoArray(wide, o + c);
        }
    }

    /**
     * Columns [c0, c1) of the 4-row × 6-token tile at token t from the widened rows (row i at w[i·stride], column c0
     * first): 24 accumulators in registers, 10 loads per 24 FMAs. The accumulators start at zero in the first column
     * block and are otherwise loaded from acc (token j's row i at a0 + (j·4 + i)·16), and are stored back there.
     */
    private void tile4x6(float[] w, int stride, int c0, int c1, float[] x, int t, float[] acc, int a0) {
        int w1 = stride - c0, w2 = 2 * stride - c0, w3 = 3 * stride - c0, w0 = -c0;
        int x0 = t * cols, x1 = x0 + cols, x2 = x1 + cols, x3 = x2 + cols, x4 = x3 + cols, x5 = x4 + cols;
        FloatVector a00, a01, a02, a03, a04, a05, a10, a11, a12, a13, a14, a15;
        FloatVector a20, a21, a22, a23, a24, a25, a30, a31, a32, a33, a34, a35;
        if (c0 == 0) {
            a00 = FloatVector.zero(F);
            a01 = a00; a02 = a00; a03 = a00; a04 = a00; a05 = a00;
            a10 = a00; a11 = a00; a12 = a00; a13 = a00; a14 = a00; a15 = a00;
            a20 = a00; a21 = a00; a22 = a00; a23 = a00; a24 = a00; a25 = a00;
            a30 = a00; a31 = a00; a32 = a00; a33 = a00; a34 = a00; a35 = a00;
        } else {
            a00 = FloatVector.fromArray(F, acc, a0);
            a10 = FloatVector.fromArray(F, acc, a0 + L);
            a20 = FloatVector.fromArray(F, acc, a0 + 2 * L);
            a30 = FloatVector.fromArray(F, acc, a0 + 3 * L);
            a01 = FloatVector.fromArray(F, acc, a0 + 4 * L);
            a11 = FloatVector.fromArray(F, acc, a0 + 5 * L);
            a21 = FloatVector.fromArray(F, acc, a0 + 6 * L);
            a31 = FloatVector.fromArray(F, acc, a0 + 7 * L);
            a02 = FloatVector.fromArray(F, acc, a0 + 8 * L);
            a12 = FloatVector.fromArray(F, acc, a0 + 9 * L);
            a22 = FloatVector.fromArray(F, acc, a0 + 10 * L);
            a32 = FloatVector.fromArray(F, acc, a0 + 11 * L);
            a03 = FloatVector.fromArray(F, acc, a0 + 12 * L);
            a13 = FloatVector.fromArray(F, acc, a0 + 13 * L);
            a23 = FloatVector.fromArray(F, acc, a0 + 14 * L);
            a33 = FloatVector.fromArray(F, acc, a0 + 15 * L);
            a04 = FloatVector.fromArray(F, acc, a0 + 16 * L);
            a14 = FloatVector.fromArray(F, acc, a0 + 17 * L);
            a24 = FloatVector.fromArray(F, acc, a0 + 18 * L);
            a34 = FloatVector.fromArray(F, acc, a0 + 19 * L);
            a05 = FloatVector.fromArray(F, acc, a0 + 20 * L);
            a15 = FloatVector.fromArray(F, acc, a0 + 21 * L);
            a25 = FloatVector.fromArray(F, acc, a0 + 22 * L);
            a35 = FloatVector.fromArray(F, acc, a0 + 23 * L);
        }
        for (int c = c0; c < c1; c += L) {
            var v0 = FloatVector.fromArray(F, w, w0 + c);
            var v1 = FloatVector.fromArray(F, w, w1 + c);
            var v2 = FloatVector.fromArray(F, w, w2 + c);
            var v3 = FloatVector.fromArray(F, w, w3 + c);
            var u = FloatVector.fromArray(F, x, x0 + c);
            a00 = v0.fma(u, a00); a10 = v1.fma(u, a10); a20 = v2.fma(u, a20); a30 = v3.fma(u, a30);
            u = FloatVector.fromArray(F, x, x1 + c);
            a01 = v0.fma(u, a01); a11 = v1.fma(u, a11); a21 = v2.fma(u, a21); a31 = v3.fma(u, a31);
            u = FloatVector.fromArray(F, x, x2 + c);
            a02 = v0.fma(u, a02); a12 = v1.fma(u, a12); a22 = v2.fma(u, a22); a32 = v3.fma(u, a32);
            u = FloatVector.fromArray(F, x, x3 + c);
            a03 = v0.fma(u, a03); a13 = v1.fma(u, a13); a23 = v2.fma(u, a23); a33 = v3.fma(u, a33);
            u = FloatVector.fromArray(F, x, x4 + c);
            a04 = v0.fma(u, a04); a14 = v1.fma(u, a14); a24 = v2.fma(u, a24); a34 = v3.fma(u, a34);
            u = FloatVector.fromArray(F, x, x5 + c);
            a05 = v0.fma(u, a05); a15 = v1.fma(u, a15); a25 = v2.fma(u, a25); a35 = v3.fma(u, a35);
        }
        a00.intoArray(acc, a0);
        a10.intoArray(acc, a0 + L);
        a20.intoArray(acc, a0 + 2 * L);
        a30.intoArray(acc, a0 + 3 * L);
        a01.intoArray(acc, a0 + 4 * L);
        a11.intoArray(acc, a0 + 5 * L);
        a21.intoArray(acc, a0 + 6 * L);
        a31.intoArray(acc, a0 + 7 * L);
        a02.intoArray(acc, a0 + 8 * L);
        a12.intoArray(acc, a0 + 9 * L);
        a22.intoArray(acc, a0 + 10 * L);
        a32.intoArray(acc, a0 + 11 * L);
        a03.intoArray(acc, a0 + 12 * L);
        a13.intoArray(acc, a0 + 13 * L);
        a23.intoArray(acc, a0 + 14 * L);
        a33.intoArray(acc, a0 + 15 * L);
        a04.intoArray(acc, a0 + 16 * L);
        a14.intoArray(acc, a0 + 17 * L);
        a24.intoArray(acc, a0 + 18 * L);
        a34.intoArray(acc, a0 + 19 * L);
        a05.intoArray(acc, a0 + 20 * L);
        a15.intoArray(acc, a0 + 21 * L);
        a25.intoArray(acc, a0 + 22 * L);
        a35.intoArray(acc, a0 + 23 * L);
    }

    /** Columns [c0, c1) of rows [r, r+4) against token t (a token chunk's last tokens), accumulators as in {@link #tile4x6}. */
    private void wide4(float[] w, int stride, int c0, int c1, float[] x, int t, float[] acc, int a0) {
        int w0 = -c0, w1 = stride - c0, w2 = 2 * stride - c0, w3 = 3 * stride - c0, x0 = t * cols;
        FloatVector s0, s1, s2, s3;
        if (c0 == 0) {
            s0 = FloatVector.zero(F);
            s1 = s0; s2 = s0; s3 = s0;
        } else {
            s0 = FloatVector.fromArray(F, acc, a0);
            s1 = FloatVector.fromArray(F, acc, a0 + L);
            s2 = FloatVector.fromArray(F, acc, a0 + 2 * L);
            s3 = FloatVector.fromArray(F, acc, a0 + 3 * L);
        }
        for (int c = c0; c < c1; c += L) {
            var u = FloatVector.fromArray(F, x, x0 + c);
            s0 = FloatVector.fromArray(F, w, w0 + c).fma(u, s0);
            s1 = FloatVector.fromArray(F, w, w1 + c).fma(u, s1);
            s2 = FloatVector.fromArray(F, w, w2 + c).fma(u, s2);
            s3 = FloatVector.fromArray(F, w, w3 + c).fma(u, s3);
        }
        s0.intoArray(acc, a0);
        s1.intoArray(acc, a0 + L);
        s2.intoArray(acc, a0 + 2 * L);
        s3.intoArray(acc, a0 + 3 * L);
    }

    /**
     * Y[t, r + i] for i < 4 from the carried accumulators (lanes summed in lane order, as {@link VectorMath#sumLanes})
     * plus the scalar tail of columns [bound, cols), as in {@link #dot}.
     */
    private void finish4(int r, int bound, float[] x, int t, float[] y, float[] acc, int a0) {
        int x0 = t * cols, y0 = t * rows + r;
        for (int i = 0; i < ROW_BLOCK; i++) {
            int o = a0 + i * L;
            float s = 0f;
            for (int k = 0; k < L; k++) s += acc[o + k];
            for (int c = bound; c < cols; c++) s += get(r + i, c) * x[x0 + c];
            y[y0 + i] = s;
        }
    }

    public float get(int r, int c) {
        if (affine != null) return affine.get(data, rows, cols, r, c);
        long i = (long) r * cols + c;
        return switch (dtype) {
            case F32 -> data.getAtIndex(F32, i);
            case BF16 -> Float.intBitsToFloat((data.getAtIndex(I16, i) & 0xffff) << 16);
            case F16 -> Float.float16ToFloat(data.getAtIndex(I16, i));
            default -> throw new IllegalStateException(dtype.toString());
        };
    }

    /**
     * Row r as an MLX engine dequantizes it — scale·q + bias computed in the scales' own format — into
     * out[off..off+cols); a matrix that is not affine-quantized gives its plain row.
     */
    public void rowInScaleFormat(int r, float[] out, int off) {
        if (affine == null) {
            row(r, out, off);
            return;
        }
        for (int c = 0; c < cols; c++) out[off + c] = affine.getInPairFormat(data, rows, cols, r, c);
    }

    /** Row r widened to fp32 into out[off..off+cols). */
    public void row(int r, float[] out, int off) {
        if (dtype == DType.F32) {
            MemorySegment.copy(data, F32, (long) r * cols * 4, out, off, cols);
            return;
        }
        for (int c = 0; c < cols; c++) out[off + c] = get(r, c);
    }

    private FloatVector load(long elem) {
        if (affine != null) {
            // the Java kernels on affine codes (where the native ones are off): element by element, as get
            var tmp = new float[L];
            int r = (int) (elem / cols), c = (int) (elem % cols);
            for (int k = 0; k < L; k++) tmp[k] = affine.get(data, rows, cols, r, c + k);
            return FloatVector.fromArray(F, tmp, 0);
        }
        return switch (dtype) {
            case F32 -> FloatVector.fromMemorySegment(F, data, elem * 4, LE);
            case BF16 -> {
                var s = ShortVector.fromMemorySegment(S, data, elem * 2, LE);
                var i = (IntVector) s.convertShape(VectorOperators.S2I, I, 0);
                yield i.lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats();
            }
            case F16 -> {
                // The Vector API has no half-float conversion; f16 checkpoints are rare, so widen lane by lane.
                var tmp = new float[L];
                for (int k = 0; k < L; k++) tmp[k] = Float.float16ToFloat(data.getAtIndex(I16, elem + k));
                yield FloatVector.fromArray(F, tmp, 0);
            }
            default -> throw new IllegalStateException(dtype.toString());
        };
    }

    public float dot(int r, float[] x, int xOff) {
        long base = (long) r * cols;
        var acc = FloatVector.zero(F);
        int c = 0;
        int bound = cols - (cols % L);
        for (; c < bound; c += L) acc = load(base + c).fma(FloatVector.fromArray(F, x, xOff + c), acc);
        float s = VectorMath.sumLanes(acc);
        for (; c < cols; c++) s += get(r, c) * x[xOff + c];
        return s;
    }

    /** Sum of the lanes in lane order: the same value as {@link VectorMath#sumLanes}, via a store instead of lane extracts. */
    private static float sumLanes(FloatVector v, float[] lanes) {
        v.intoArray(lanes, 0);
        float s = 0f;
        for (int i = 0; i < L; i++) s += lanes[i];
        return s;
    }

    /** y[yOff + k] = W[r + k]·x[xOff ..] for k < 4 (bf16 or f32 weights). */
    private void rows4(int r, float[] x, int xOff, float[] y, int yOff, float[] lanes) {
        long b0 = (long) r * cols, b1 = b0 + cols, b2 = b1 + cols, b3 = b2 + cols;
        var a0 = FloatVector.zero(F);
        var a1 = FloatVector.zero(F);
        var a2 = FloatVector.zero(F);
        var a3 = FloatVector.zero(F);
        int c = 0;
        int bound = cols - (cols % L);
        for (; c < bound; c += L) {
            var xv = FloatVector.fromArray(F, x, xOff + c);
            a0 = load(b0 + c).fma(xv, a0);
            a1 = load(b1 + c).fma(xv, a1);
            a2 = load(b2 + c).fma(xv, a2);
            a3 = load(b3 + c).fma(xv, a3);
        }
        float s0 = sumLanes(a0, lanes), s1 = sumLanes(a1, lanes), s2 = sumLanes(a2, lanes), s3 = sumLanes(a3, lanes);
        for (; c < cols; c++) {
            float xc = x[xOff + c];
            s0 += get(r, c) * xc;
            s1 += get(r + 1, c) * xc;
            s2 += get(r + 2, c) * xc;
            s3 += get(r + 3, c) * xc;
        }
        y[yOff] = s0;
        y[yOff + 1] = s1;
        y[yOff + 2] = s2;
        y[yOff + 3] = s3;
    }

    private void dot4(int r, float[] x, int t, float[] y) {
        long base = (long) r * cols;
        int x0 = t * cols, x1 = x0 + cols, x2 = x1 + cols, x3 = x2 + cols;
        var a0 = FloatVector.zero(F);
        var a1 = FloatVector.zero(F);
        var a2 = FloatVector.zero(F);
        var a3 = FloatVector.zero(F);
        int c = 0;
        int bound = cols - (cols % L);
        for (; c < bound; c += L) {
            var w = load(base + c);
            a0 = w.fma(FloatVector.fromArray(F, x, x0 + c), a0);
            a1 = w.fma(FloatVector.fromArray(F, x, x1 + c), a1);
            a2 = w.fma(FloatVector.fromArray(F, x, x2 + c), a2);
            a3 = w.fma(FloatVector.fromArray(F, x, x3 + c), a3);
        }
        float s0 = VectorMath.sumLanes(a0), s1 = VectorMath.sumLanes(a1);
        float s2 = VectorMath.sumLanes(a2), s3 = VectorMath.sumLanes(a3);
        for (; c < cols; c++) {
            float w = get(r, c);
            s0 += w * x[x0 + c];
            s1 += w * x[x1 + c];
            s2 += w * x[x2 + c];
            s3 += w * x[x3 + c];
        }
        y[t * rows + r] = s0;
        y[(t + 1) * rows + r] = s1;
        y[(t + 2) * rows + r] = s2;
        y[(t + 3) * rows + r] = s3;
    }
}
