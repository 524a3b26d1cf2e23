package dev.decodiff.llamacpp.gguf;

import dev.decodiff.engine.Gemma4Config;
import dev.decodiff.llamacpp.ffi.LlamaCppTestSupport;
import dev.decodiff.metal.SafetensorsFile;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.nio.channels.FileChannel;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A GGUF's weights as a checkpoint folder: every tensor is what ggml's own dequantize_row_* (libggml-base, through
 * FFM) makes of the file's blocks, under its Hugging Face name and shape, and the rebuilt config is the source
 * checkpoint's configuration, layer by layer.
 */
class GgufToCheckpointTest {
    static SymbolLookup ggml;
    static final java.util.Map<GgmlType, java.lang.invoke.MethodHandle> HANDLES = new java.util.concurrent.ConcurrentHashMap<>();
    static final Arena ARENA = Arena.ofShared();

    @TempDir Path tmp;

    @BeforeAll
    static void load() { ggml = SymbolLookup.libraryLookup(LlamaCppTestSupport.requireHome().libggmlBase(), ARENA); }

    static float[] ggmlDequantize(GgmlType t, Path file, long at, long bytes, int n) throws Throwable {
        var fn = HANDLES.computeIfAbsent(t, k -> Linker.nativeLinker().downcallHandle(ggml.find("dequantize_row_" + k.name().toLowerCase().replace("_k", "_K")).orElseThrow(),
                FunctionDescriptor.ofVoid(ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG)));
        try (var a = Arena.ofConfined(); var ch = FileChannel.open(file)) {
            var src = ch.map(FileChannel.MapMode.READ_ONLY, at, bytes, a);
            var dst = a.allocate(ValueLayout.JAVA_FLOAT, n);
            fn.invoke(src, dst, (long) n);
            return dst.toArray(ValueLayout.JAVA_FLOAT);
        }
    }

    @Test
    void everyTensorIsGgmlsDequantizationAndTheConfigIsTheSourcesOne() throws Throwable {
        // every bundled form once (PLE and KV sharing, MoE), both block types
        var cases = java.util.Map.of("gemma4-tiny", GgufOutputType.Q4_0, "gemma4-tiny-ple", GgufOutputType.Q8_0, "gemma4-tiny-moe", GgufOutputType.Q8_0);
        for (String name : Checkpoints.BUNDLED) {
            for (var type : new GgufOutputType[]{cases.get(name)}) {
                Path src = Checkpoints.dir(name), gguf = tmp.resolve(name + "-" + type + ".gguf"), dir = tmp.resolve(name + "-" + type);
                HfToGguf.convert(src, gguf, type, false);
                var g = GgufFile.read(gguf);
                GgufToCheckpoint.convert(g, "0".repeat(64), dir);
                assertThat(Gemma4Config.read(dir.resolve("config.json"))).as(name).isEqualTo(Gemma4Config.read(src.resolve("config.json")));
                int quantized = 0;
                try (var f = SafetensorsFile.open(dir.resolve("model.safetensors"))) {
                    assertThat(f.tensors()).hasSize(g.tensors().size() - 1); // all but rope_freqs
                    for (var t : g.tensors()) {
                        if (t.name().equals("rope_freqs.weight")) continue;
                        String hf = Gemma4TensorNames.hfName(t.name());
                        var got = f.tensors().get(hf.equals("lm_head.weight") ? hf : "model." + hf);
                        assertThat(got).as(t.name()).isNotNull();
                        long[] ne = t.ne();
                        assertThat(got.shape()[0]).as(t.name()).isEqualTo(ne[ne.length - 1]);
                        if (t.type() == GgmlType.Q8_0 || t.type() == GgmlType.Q4_0) {
                            quantized++;
                            var want = ggmlDequantize(t.type(), gguf, g.dataOffset() + t.offset(), t.byteSize(), (int) t.elementCount());
                            assertThat(got.toFloats()).as(t.name()).containsExactly(want);
                        } else assertThat(got.toFloats()).as(t.name()).containsExactly(g.floats(t.name()));
                    }
                }
                assertThat(quantized).as(name + " " + type).isGreaterThan(30);
            }
        }
    }

    @Test
    void aTypeDecodiffCannotDequantizeIsRefusedNamingTheTensor() throws Exception {
        Path gguf = tmp.resolve("x.gguf");
        HfToGguf.convert(Checkpoints.dir("gemma4-tiny"), gguf, GgufOutputType.F32, false);
        var g = GgufFile.read(gguf);
        var infos = new java.util.ArrayList<GgufWriter.Tensor>();
        for (var t : g.tensors()) {
            // the attention output of layer 1 as Q3_K: a ggml type decodiff does not dequantize
            boolean odd = t.name().equals("blk.1.attn_output.weight");
            var type = odd ? GgmlType.Q3_K : t.type();
            long[] ne = odd ? new long[]{256, 64} : t.ne();
            float[] v = odd ? null : g.floats(t.name());
            long bytes = type.rowBytes(ne[0]) * (ne.length > 1 ? ne[1] : 1);
            infos.add(new GgufWriter.Tensor(t.name(), ne, type, sink -> {
                if (v == null) sink.bytes(new byte[(int) bytes]);
                else {
                    var b = java.nio.ByteBuffer.allocate(v.length * 4).order(java.nio.ByteOrder.LITTLE_ENDIAN);
                    b.asFloatBuffer().put(v);
                    sink.bytes(b.array());
                }
            }));
        }
        Path bad = tmp.resolve("q3k.gguf");
        GgufWriter.write(bad, g.metadata(), infos, false);
        var thrown = org.assertj.core.api.Assertions.catchThrowable(() -> GgufToCheckpoint.convert(GgufFile.read(bad), "0".repeat(64), tmp.resolve("out")));
        assertThat(thrown).isInstanceOf(GgufException.class)
                .hasMessageContaining("tensor 'blk.1.attn_output.weight' is Q3_K").hasMessageContaining("requantize");
        assertThat(tmp.resolve("out")).doesNotExist();
    }

    /** ggml's blocks of {@code x} in type t, via its quantize_row_<t>_ref. */
    static byte[] ggmlQuantize(GgmlType t, float[] x) throws Throwable {
        var fn = Linker.nativeLinker().downcallHandle(ggml.find("quantize_row_" + t.name().toLowerCase().replace("_k", "_K") + "_ref").orElseThrow(),
                FunctionDescriptor.ofVoid(ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG));
        try (var a = Arena.ofConfined()) {
            var src = a.allocateFrom(ValueLayout.JAVA_FLOAT, x);
            var dst = a.allocate(t.rowBytes(x.length));
            fn.invoke(src, dst, (long) x.length);
            return dst.toArray(ValueLayout.JAVA_BYTE);
        }
    }

    @Test
    void aFileOfK_QuantsIsRunAsGgmlDequantizesIt() throws Throwable {
        // the matrices whose rows are whole 256-value super-blocks (down_proj, full layers' o_proj) as Q4_K and Q6_K
        Path f32 = tmp.resolve("f32.gguf");
        HfToGguf.convert(Checkpoints.dir("gemma4-tiny"), f32, GgufOutputType.F32, false);
        var g = GgufFile.read(f32);
        var tensors = new java.util.ArrayList<GgufWriter.Tensor>();
        int k = 0;
        for (var t : g.tensors()) {
            float[] v = g.floats(t.name());
            long[] ne = t.ne();
            GgmlType type = ne.length == 2 && ne[0] % 256 == 0 ? (k++ % 2 == 0 ? GgmlType.Q4_K : GgmlType.Q6_K) : GgmlType.F32;
            byte[] bytes;
            if (type == GgmlType.F32) {
                var b = java.nio.ByteBuffer.allocate(v.length * 4).order(java.nio.ByteOrder.LITTLE_ENDIAN);
                b.asFloatBuffer().put(v);
                bytes = b.array();
            } else bytes = ggmlQuantize(type, v);
            tensors.add(new GgufWriter.Tensor(t.name(), ne, type, sink -> sink.bytes(bytes)));
        }
        assertThat(k).isGreaterThanOrEqualTo(6);
        Path kq = tmp.resolve("k.gguf");
        GgufWriter.write(kq, g.metadata(), tensors, false);
        var q = GgufFile.read(kq);
        Path dir = tmp.resolve("k");
        GgufToCheckpoint.convert(q, "0".repeat(64), dir);
        assertThat(GgufToCheckpoint.matrixTypes(q)).containsKeys("Q4_K", "Q6_K", "F32");
        int checked = 0;
        try (var f = SafetensorsFile.open(dir.resolve("model.safetensors"))) {
            for (var t : q.tensors()) {
                if (t.type() != GgmlType.Q4_K && t.type() != GgmlType.Q6_K) continue;
                var want = ggmlDequantize(t.type(), kq, q.dataOffset() + t.offset(), t.byteSize(), (int) t.elementCount());
                assertThat(f.tensors().get("model." + Gemma4TensorNames.hfName(t.name())).toFloats()).as(t.name()).containsExactly(want);
                checked++;
            }
        }
        assertThat(checked).isEqualTo(k);
    }
}
