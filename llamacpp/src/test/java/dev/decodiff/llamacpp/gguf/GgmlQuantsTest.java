package dev.decodiff.llamacpp.gguf;

import dev.decodiff.llamacpp.ffi.LlamaCppTestSupport;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * ggml's own code, called through FFM in llama.cpp's libggml-base, judges {@link GgmlQuants}: its quantize_row_*_ref
 * makes blocks of random weights, its dequantize_row_* turns them into floats, and ours must give the same floats bit
 * for bit; our Q8_0 / Q4_0 writers must give ggml's reference blocks byte for byte.
 */
class GgmlQuantsTest {
    static final Linker LINKER = Linker.nativeLinker();
    static SymbolLookup ggml;
    static final Arena ARENA = Arena.ofShared();

    @BeforeAll
    static void load() {
        var home = LlamaCppTestSupport.requireHome();
        ggml = SymbolLookup.libraryLookup(home.libggmlBase(), ARENA);
    }

    static MethodHandle fn(String name) {
        return LINKER.downcallHandle(ggml.find(name).orElseThrow(() -> new AssertionError(name + " is not in libggml-base")),
                FunctionDescriptor.ofVoid(ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG));
    }

    /** Weights with the spread real ones have: normal, some outliers, some exact zeros and one all-zero block. */
    static float[] weights(int n, long seed) {
        var r = new Random(seed);
        var x = new float[n];
        for (int i = 0; i < n; i++) {
            double v = r.nextGaussian() * 0.05;
            if (r.nextInt(97) == 0) v *= 12;
            if (r.nextInt(53) == 0) v = 0;
            x[i] = (float) v;
        }
        for (int i = 256; i < 512 && i < n; i++) x[i] = 0f;
        return x;
    }

    /** ggml's blocks of x in type t, via its quantize_row_<t>_ref. */
    static MemorySegment ggmlQuantize(GgmlType t, float[] x) throws Throwable {
        var src = ARENA.allocateFrom(ValueLayout.JAVA_FLOAT, x);
        var dst = ARENA.allocate(t.rowBytes(x.length));
        fn("quantize_row_" + name(t) + "_ref").invoke(src, dst, (long) x.length);
        return dst;
    }

    static float[] ggmlDequantize(GgmlType t, MemorySegment blocks, int n) throws Throwable {
        var dst = ARENA.allocate(ValueLayout.JAVA_FLOAT, n);
        fn("dequantize_row_" + name(t)).invoke(blocks, dst, (long) n);
        return dst.toArray(ValueLayout.JAVA_FLOAT);
    }

    static String name(GgmlType t) { return t.name().toLowerCase().replace("_k", "_K"); }

    @Test
    void dequantizationGivesGgmlsFloatsBitForBit() throws Throwable {
        int n = 256 * 24;
        for (var t : new GgmlType[]{GgmlType.Q8_0, GgmlType.Q4_0, GgmlType.Q4_1, GgmlType.Q5_0, GgmlType.Q5_1,
                GgmlType.Q4_K, GgmlType.Q5_K, GgmlType.Q6_K}) {
            for (long seed = 1; seed <= 3; seed++) {
                var blocks = ggmlQuantize(t, weights(n, seed * 7919 + t.id()));
                var want = ggmlDequantize(t, blocks, n);
                var got = new float[n];
                GgmlQuants.dequantize(t, blocks, 0, n, got, 0);
                for (int i = 0; i < n; i++)
                    assertThat(Float.floatToRawIntBits(got[i])).as("%s seed %d value %d: %s vs ggml %s", t, seed, i, got[i], want[i])
                            .isEqualTo(Float.floatToRawIntBits(want[i]));
                // and the quantization did something: not all values kept, not all zero
                assertThat(want).as(t.toString()).contains(0f).doesNotContain(Float.NaN);
                long distinct = java.util.stream.IntStream.range(0, n).mapToObj(i -> want[i]).distinct().count();
                assertThat(distinct).as(t + " distinct values").isGreaterThan(16);
            }
            // a block at an offset inside a larger buffer (a tensor inside the GGUF's data section)
            var x = weights(512, 5);
            var blocks = ggmlQuantize(t, x);
            long off = t.rowBytes(256);
            var got = new float[256];
            GgmlQuants.dequantize(t, blocks, off, 256, got, 0);
            var want = ggmlDequantize(t, blocks, 512);
            assertThat(got).containsExactly(java.util.Arrays.copyOfRange(want, 256, 512));
        }
    }

    @Test
    void q8_0AndQ4_0WritersGiveGgmlsReferenceBlocksByteForByte() throws Throwable {
        int n = 32 * 200;
        for (var t : new GgmlType[]{GgmlType.Q8_0, GgmlType.Q4_0}) {
            for (long seed = 11; seed <= 13; seed++) {
                var x = weights(n, seed);
                // exact halves and ties: x·id lands on .5 for some values
                x[40] = 0.5f; x[41] = -0.5f; x[42] = 127.5f / 127f; x[43] = 1f;
                var want = ggmlQuantize(t, x).toArray(ValueLayout.JAVA_BYTE);
                var got = t == GgmlType.Q8_0 ? GgmlQuants.quantizeQ8_0(x, 0, n) : GgmlQuants.quantizeQ4_0(x, 0, n);
                assertThat(got).as("%s seed %d", t, seed).containsExactly(want);
            }
        }
    }

    @Test
    void aQ8_0OrQ4_0ConversionHoldsGgmlsBlocksOfTheCheckpointAndF16WhereRowsAreNoWholeBlock(@org.junit.jupiter.api.io.TempDir java.nio.file.Path tmp) throws Throwable {
        var ck = Checkpoints.dir("gemma4-tiny-ple");
        for (var type : new GgufOutputType[]{GgufOutputType.Q8_0, GgufOutputType.Q4_0}) {
            var out = tmp.resolve(type + ".gguf");
            HfToGguf.convert(ck, out, type, false);
            var g = GgufFile.read(out);
            assertThat(g.get("general.file_type").toString()).contains(Integer.toString(type.fileType()));
            try (var files = dev.decodiff.engine.CheckpointFiles.open(ck)) {
                var q = g.tensor("blk.1.attn_q.weight");
                assertThat(q.type()).isEqualTo(type.matrixType());
                var src = files.get("layers.1.self_attn.q_proj.weight").toFloats();
                var want = ggmlQuantize(type.matrixType(), src).toArray(ValueLayout.JAVA_BYTE);
                try (var a = Arena.ofConfined(); var ch = java.nio.channels.FileChannel.open(out)) {
                    var seg = ch.map(java.nio.channels.FileChannel.MapMode.READ_ONLY, g.dataOffset() + q.offset(), q.byteSize(), a);
                    assertThat(seg.toArray(ValueLayout.JAVA_BYTE)).containsExactly(want);
                }
                // and reading it back gives ggml's dequantization of those blocks
                assertThat(g.floats("blk.1.attn_q.weight")).containsExactly(ggmlDequantize(type.matrixType(), ggmlQuantize(type.matrixType(), src), src.length));
            }
            // per_layer_projection rows are 16 values: no whole Q8_0/Q4_0 block, so F16 as llama.cpp's converter falls back
            assertThat(g.tensor("blk.0.proj.weight").type()).isEqualTo(GgmlType.F16);
            assertThat(g.tensor("blk.0.attn_norm.weight").type()).isEqualTo(GgmlType.F32);
        }
    }

    /**
     * The precision hypothesis of ggml's matmul input for K-quant weights (the engine's op graph) against ggml's own
     * quantize_row_q8_K_ref then dequantize_row_q8_K: the same floats bit for bit, a negative extreme, ties and an
     * all-zero block included.
     */
    @Test
    void theEnginesQ8_KInputIsGgmlsQuantizeAndDequantizeOfQ8_K() throws Throwable {
        int n = 256 * 12;
        for (long seed = 21; seed <= 23; seed++) {
            var x = weights(n, seed);
            x[700] = -3.5f; // block 2's extreme is negative: iscale = -127/max flips the sign
            x[1030] = 1f; x[1031] = -1f; // equal magnitudes: the first is the block's max
            var blocks = ARENA.allocate(292L * n / 256);
            fn("quantize_row_q8_K_ref").invoke(ARENA.allocateFrom(ValueLayout.JAVA_FLOAT, x), blocks, (long) n);
            var dst = ARENA.allocate(ValueLayout.JAVA_FLOAT, n);
            fn("dequantize_row_q8_K").invoke(blocks, dst, (long) n);
            var want = dst.toArray(ValueLayout.JAVA_FLOAT);
            var got = dev.decodiff.engine.ops.Gemma4Ops.q8KActivations(x, 512);
            for (int i = 0; i < n; i++)
                assertThat(Float.floatToRawIntBits(got[i])).as("seed %d value %d: %s vs ggml %s (x %s)", seed, i, got[i], want[i], x[i])
                        .isEqualTo(Float.floatToRawIntBits(want[i]));
            assertThat(got[700]).isEqualTo(-3.5f);
        }
    }
}
