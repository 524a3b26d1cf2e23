package dev.decodiff.jmh;

import dev.decodiff.metal.DType;
import dev.decodiff.metal.MatmulPrecision;
import dev.decodiff.metal.FmaPeak;
import dev.decodiff.metal.Parallel;
import dev.decodiff.metal.PackedRows;
import dev.decodiff.metal.StreamRead;
import dev.decodiff.metal.VectorMath;
import dev.decodiff.metal.WeightMatrix;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;
import org.openjdk.jmh.infra.Blackhole;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

/**
 * The hot kernels at the bench model's shapes (a 1.06 B Gemma 4: hidden 1536, FFN 6144): matvec over a matrix far
 * larger than the L3 cache (decode: memory-bound; compare its bytes/op with {@link #streamRead}), the blocked GEMM
 * of prefill, and one
 * attention group (four query heads of one KV head) at context 2048 (scores, softmax, weighted sum, as the engine does it).
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(value = 1, jvmArgsAppend = {"--add-modules", "jdk.incubator.vector", "--enable-native-access=ALL-UNNAMED"})
public class KernelBench {
    /** Rows of the decode matrix: 262144 = the vocabulary head (805 MB bf16), far beyond any cache. */
    @Param({"262144"})
    int rows;

    @Param({"1536"})
    int cols;

    @Param({"BF16", "F32"})
    String dtype;

    /** Tokens of the prefill GEMM. */
    @Param({"512"})
    int tokens;

    WeightMatrix big, ffn;
    float[] x, y, xs, ys;
    MemorySegment raw;
    // attention: four query heads over one KV head, d = 512 (a full layer), context 2048
    float[] q, keys, values, scores, out;
    float[][] keyRows = new float[CTX][], valueRows = new float[CTX][];
    int[] offsets = new int[CTX];
    float[] groupScores = new float[VectorMath.HEADS * CTX];
    PackedRows q8Rows;
    int[] slots = new int[CTX];
    static final int D = 512, CTX = 2048;
    static final int[] HEAD_OFFSETS = {0, D, 2 * D, 3 * D};

    @Setup(Level.Trial)
    public void setup() {
        var dt = DType.valueOf(dtype);
        big = random(dt, dt == DType.F32 ? rows / 2 : rows, cols, 1);
        raw = big.data();
        ffn = random(dt, 6144, cols, 2);
        var rnd = new SplittableRandom(3);
        x = new float[cols];
        for (int i = 0; i < cols; i++) x[i] = (float) rnd.nextGaussian();
        y = new float[big.rows()];
        xs = new float[tokens * cols];
        for (int i = 0; i < xs.length; i++) xs[i] = (float) rnd.nextGaussian();
        ys = new float[tokens * ffn.rows()];
        q = new float[VectorMath.HEADS * D];
        keys = new float[CTX * D];
        values = new float[CTX * D];
        for (int i = 0; i < q.length; i++) q[i] = (float) rnd.nextGaussian();
        for (int i = 0; i < keys.length; i++) { keys[i] = (float) rnd.nextGaussian(); values[i] = (float) rnd.nextGaussian(); }
        scores = new float[CTX];
        out = new float[VectorMath.HEADS * D];
        byte[] qs = new byte[CTX * D];
        short[] scales = new short[CTX * D / PackedRows.BLOCK];
        for (int i = 0; i < qs.length; i++) qs[i] = (byte) (rnd.nextInt(255) - 127);
        for (int i = 0; i < scales.length; i++) scales[i] = Float.floatToFloat16(0.01f);
        q8Rows = new PackedRows(PackedRows.Format.Q8_0, qs, scales, D);
        for (int j = 0; j < CTX; j++) slots[j] = j;
    }

    static WeightMatrix random(DType dt, int rows, int cols, long seed) {
        long n = (long) rows * cols;
        MemorySegment seg = Arena.global().allocate(n * dt.bytes(), 64);
        long s = seed * 0x9E3779B97F4A7C15L + 1;
        for (long i = 0; i < n; i++) {
            s ^= s >>> 12; s ^= s << 25; s ^= s >>> 27;
            float v = ((s * 0x2545F4914F6CDD1DL >>> 40) * 0x1.0p-24f - 0.5f) * 0.1f;
            if (dt == DType.BF16) seg.setAtIndex(ValueLayout.JAVA_SHORT_UNALIGNED, i, (short) (Float.floatToRawIntBits(v) >>> 16));
            else seg.setAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i, v);
        }
        return new WeightMatrix("bench", dt, rows, cols, seg);
    }

    /** Decode's kernel on the Java path: one token against a matrix of {@code rows × cols} (GB/s = bytes / time). */
    @Benchmark
    public float matvecJava() {
        big.matvecJava(x, 0, y, 0);
        return y[y.length - 1];
    }

    /** The same on the native path (bf16 with AVX-512; the Java path otherwise), what {@link WeightMatrix#matvec} runs. */
    @Benchmark
    public float matvec() {
        big.matvec(x, 0, y, 0);
        return y[y.length - 1];
    }

    /** The yardstick for {@link #matvec}: the same bytes read with the least work (Java). */
    @Benchmark
    public long streamRead() { return StreamRead.read(raw, false); }

    /** The yardstick with the native prefetching reader (the Java one where there is none). */
    @Benchmark
    public long streamReadNative() { return StreamRead.read(raw, true); }

    /** Prefill's kernel on the Java path: {@code tokens} tokens through a 6144 × cols FFN matrix. */
    @Benchmark
    public float matmulJava() {
        ffn.matmulJava(xs, tokens, ys);
        return ys[ys.length - 1];
    }

    /** The same as {@link WeightMatrix#matmul} runs it (native for bf16 with AVX-512). */
    @Benchmark
    public float matmul() {
        ffn.matmul(xs, tokens, ys);
        return ys[ys.length - 1];
    }

    /** The same GEMM with --matmul bf16: activations rounded to bf16, AVX512-BF16 dot products where the CPU has them. */
    @Benchmark
    public float matmulBf16() {
        ffn.matmul(xs, tokens, ys, MatmulPrecision.BF16);
        return ys[ys.length - 1];
    }

    /** The fp32 FMA peak yardstick bench reports: 1M iterations of the in-register FMA loop on every thread (GFLOPS). */
    @Benchmark
    public double fmaPeak() { return FmaPeak.gflops(Parallel.threads(), 1_000_000L); }

    /** {@link #attentionGroup} over a q8_0 cache read packed (widened in registers): same bits as over its decoded rows. */
    @Benchmark
    public void attentionGroupQ8(Blackhole bh) {
        var span = new PackedRows.Span(q8Rows, slots, CTX, 0);
        VectorMath.dotsHeads(q, HEAD_OFFSETS, VectorMath.HEADS, span, keyRows, offsets, CTX, D, groupScores, CTX);
        for (int h = 0; h < VectorMath.HEADS; h++) VectorMath.softmax(groupScores, h * CTX, CTX);
        java.util.Arrays.fill(out, 0f);
        VectorMath.weightedSumHeads(groupScores, CTX, VectorMath.HEADS, span, valueRows, offsets, CTX, D, out, HEAD_OFFSETS);
        bh.consume(out);
    }

    /** Four query heads of one KV head reading 2048 positions of d = 512 (scores, softmax, weighted sum), as the engine does it. */
    @Benchmark
    public void attentionGroup(Blackhole bh) {
        for (int j = 0; j < CTX; j++) {
            keyRows[j] = keys;
            valueRows[j] = values;
            offsets[j] = j * D;
        }
        VectorMath.dotsHeads(q, HEAD_OFFSETS, VectorMath.HEADS, keyRows, offsets, CTX, D, groupScores, CTX);
        for (int h = 0; h < VectorMath.HEADS; h++) VectorMath.softmax(groupScores, h * CTX, CTX);
        java.util.Arrays.fill(out, 0f);
        VectorMath.weightedSumHeads(groupScores, CTX, VectorMath.HEADS, valueRows, offsets, CTX, D, out, HEAD_OFFSETS);
        bh.consume(out);
    }

    /** Query rows of a prefill's attention block ({@link #attentionPrefillBlock}): the last 16 of a 2048-token causal prompt. */
    static final int BLOCK_ROWS = 16;
    float[] blockQ, blockOut, blockScores;
    int[][] blockQOffs = new int[BLOCK_ROWS][VectorMath.HEADS];
    int[] blockFrom = new int[BLOCK_ROWS], blockCount = new int[BLOCK_ROWS], blockBase = new int[BLOCK_ROWS];

    @Setup
    public void setupBlock() {
        var rnd = new java.util.Random(7);
        blockQ = new float[BLOCK_ROWS * VectorMath.HEADS * D];
        for (int i = 0; i < blockQ.length; i++) blockQ[i] = (float) rnd.nextGaussian() * 0.05f;
        blockOut = new float[blockQ.length];
        blockScores = new float[BLOCK_ROWS * VectorMath.HEADS * CTX];
        for (int r = 0; r < BLOCK_ROWS; r++) {
            blockCount[r] = CTX - BLOCK_ROWS + r + 1;
            blockBase[r] = r * VectorMath.HEADS * CTX;
            for (int h = 0; h < VectorMath.HEADS; h++) blockQOffs[r][h] = (r * VectorMath.HEADS + h) * D;
        }
    }

    /** Those 16 rows one at a time, as a prefill attended before: every row reads its up to 2048 keys and values alone. */
    @Benchmark
    public void attentionPrefillRowByRow(Blackhole bh) {
        for (int j = 0; j < CTX; j++) {
            keyRows[j] = keys;
            valueRows[j] = values;
            offsets[j] = j * D;
        }
        java.util.Arrays.fill(blockOut, 0f);
        for (int r = 0; r < BLOCK_ROWS; r++) {
            int n = blockCount[r];
            VectorMath.dotsHeads(blockQ, blockQOffs[r], VectorMath.HEADS, keyRows, offsets, n, D, groupScores, CTX);
            for (int h = 0; h < VectorMath.HEADS; h++) VectorMath.softmax(groupScores, h * CTX, n);
            VectorMath.weightedSumHeads(groupScores, CTX, VectorMath.HEADS, valueRows, offsets, n, D, blockOut, blockQOffs[r]);
        }
        bh.consume(blockOut);
    }

    /** The same 16 rows together (dotsHeadsRows, weightedSumRows): each block of keys and values read once for all of them; same bits. */
    @Benchmark
    public void attentionPrefillBlock(Blackhole bh) {
        for (int j = 0; j < CTX; j++) {
            keyRows[j] = keys;
            valueRows[j] = values;
            offsets[j] = j * D;
        }
        java.util.Arrays.fill(blockOut, 0f);
        VectorMath.dotsHeadsRows(blockQ, blockQOffs, VectorMath.HEADS, BLOCK_ROWS, keyRows, offsets, blockFrom, blockCount, D, blockScores, blockBase, CTX);
        for (int r = 0; r < BLOCK_ROWS; r++)
            for (int h = 0; h < VectorMath.HEADS; h++) VectorMath.softmax(blockScores, blockBase[r] + h * CTX, blockCount[r]);
        VectorMath.weightedSumRows(blockScores, blockBase, CTX, VectorMath.HEADS, BLOCK_ROWS, valueRows, offsets, blockFrom, blockCount, D, blockOut,
                blockQOffs);
        bh.consume(blockOut);
    }

    /** The same four heads one at a time, one key at a time (dot, then axpy per key): same bits, for the ratio. */
    @Benchmark
    public void attentionPerHeadPerKey(Blackhole bh) {
        java.util.Arrays.fill(out, 0f);
        for (int h = 0; h < VectorMath.HEADS; h++) {
            for (int j = 0; j < CTX; j++) scores[j] = VectorMath.dot(q, h * D, keys, j * D, D);
            VectorMath.softmax(scores, 0, CTX);
            for (int j = 0; j < CTX; j++) VectorMath.axpy(scores[j], values, j * D, out, h * D, D);
        }
        bh.consume(out);
    }
}
