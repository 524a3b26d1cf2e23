package dev.decodiff.harness.fuzz;

import dev.decodiff.harness.cli.CliTest;
import dev.decodiff.llamacpp.gguf.GgmlType;
import dev.decodiff.llamacpp.gguf.GgufFile;
import dev.decodiff.llamacpp.gguf.GgufValue;
import dev.decodiff.llamacpp.gguf.GgufWriter;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.BeforeContainer;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Fuzzing of the GGUF reader through `decodiff inspect FILE.gguf`: a small valid file (metadata of every shape the
 * converter writes: strings, uint32, float32, bool and int32/string arrays; tensors of three types) has header bytes
 * flipped, count and length fields replaced by arbitrary 64-bit values, or its end cut off. The outcome must be a
 * description (exit 0) or one clean line naming the file (exit 2) — never an internal error, a hang, an allocation
 * of what a corrupted count claims; a cut that loses tensor data must never read as a whole file.
 */
class GgufReaderFuzzTest {
    private static final long HANG_SECONDS = 20;
    static Path root, clean;
    static byte[] bytes;
    static long dataEnd;
    /** Offsets of the u64 counts and lengths in the clean file: tensor count, metadata count, then every string/array length. */
    static List<Integer> lengthFields;

    @BeforeContainer
    static void corpus() throws IOException {
        root = Files.createTempDirectory("decodiff-gguf-fuzz");
        clean = root.resolve("clean.gguf");
        var md = new LinkedHashMap<String, GgufValue>();
        md.put("general.architecture", GgufValue.string("gemma4"));
        md.put("gemma4.block_count", GgufValue.u32(2));
        md.put("gemma4.attention.layer_norm_rms_epsilon", GgufValue.f32(1e-6f));
        md.put("gemma4.attention.sliding_window_pattern", GgufValue.boolArray(List.of(true, false)));
        md.put("gemma4.attention.head_count_kv", GgufValue.i32Array(List.of(2, 1)));
        md.put("tokenizer.ggml.tokens", GgufValue.stringArray(List.of("<pad>", "a", "b")));
        GgufWriter.write(clean, md, List.of(
                new GgufWriter.Tensor("rope_freqs.weight", new long[]{4}, GgmlType.F32, s -> { for (int i = 0; i < 4; i++) s.f32(1f); }),
                new GgufWriter.Tensor("blk.0.attn_q.weight", new long[]{8, 2}, GgmlType.BF16, s -> { for (int i = 0; i < 16; i++) s.u16(0x3f80); }),
                new GgufWriter.Tensor("blk.1.attn_q.weight", new long[]{8, 2}, GgmlType.F16, s -> { for (int i = 0; i < 16; i++) s.u16(0x3c00); })), false);
        bytes = Files.readAllBytes(clean);
        var f = GgufFile.read(clean);
        var last = f.tensors().getLast();
        dataEnd = f.dataOffset() + last.offset() + last.byteSize();
        lengthFields = List.of(8, 16, 24, 24 + 8 + 20 + 4); // counts, the first key's length, its string value's length
    }

    @AfterContainer
    static void cleanUp() throws IOException {
        try (var s = Files.walk(root)) {
            s.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        }
    }

    record Outcome(int code, String out, String err) {}

    static Outcome inspect(byte[] content) {
        Path f;
        try {
            f = Files.createTempFile(root, "cand", ".gguf");
            Files.write(f, content);
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
        var ex = Executors.newSingleThreadExecutor(r -> { var t = new Thread(r, "fuzz-inspect"); t.setDaemon(true); return t; });
        try {
            var r = ex.submit(() -> CliTest.run("inspect", f.toString())).get(HANG_SECONDS, TimeUnit.SECONDS);
            return new Outcome(r.code(), r.out(), r.err());
        } catch (TimeoutException e) {
            throw new AssertionError("inspect hung (> " + HANG_SECONDS + " s)");
        } catch (InterruptedException | ExecutionException e) {
            throw new AssertionError("inspect crashed", e);
        } finally {
            ex.shutdownNow();
            f.toFile().delete();
        }
    }

    static void assertHandled(Outcome o, String what) {
        assertThat(o.code()).as(what + "\n" + o.err()).isIn(0, 2);
        assertThat(o.err()).as(what).doesNotContain("internal error").doesNotContain("Exception in");
        if (o.code() == 2) assertThat(o.err().strip().lines()).as(what + "\n" + o.err()).hasSize(1).allMatch(l -> l.contains(".gguf"));
    }

    @Property
    void headerByteFlipsAreDescribedOrRefusedCleanly(@ForAll("headerOffsets") List<Integer> at, @ForAll("bytes") List<Byte> to) {
        byte[] b = bytes.clone();
        for (int i = 0; i < Math.min(at.size(), to.size()); i++) b[at.get(i)] = to.get(i);
        assertHandled(inspect(b), "flips at " + at);
    }

    @Property
    void arbitraryCountsAndLengthsAreRefusedWithoutAllocatingWhatTheyClaim(@ForAll("lengthField") int field, @ForAll long value) {
        byte[] b = bytes.clone();
        ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).putLong(field, value);
        var o = inspect(b);
        assertHandled(o, "u64 at " + field + " = " + Long.toUnsignedString(value));
    }

    @Property
    void aCutThatLosesTensorDataIsAlwaysRefused(@ForAll @IntRange(min = 0, max = 4096) int cut) {
        int length = (int) Math.min(cut, bytes.length);
        var o = inspect(java.util.Arrays.copyOf(bytes, length));
        assertHandled(o, "cut to " + length);
        if (length < dataEnd) assertThat(o.code()).as("cut to " + length + " of " + bytes.length + " bytes read as whole").isEqualTo(2);
    }

    @Provide
    Arbitrary<List<Integer>> headerOffsets() {
        return Arbitraries.integers().between(0, (int) (dataEnd - 1)).list().ofMinSize(1).ofMaxSize(4);
    }

    @Provide
    Arbitrary<List<Byte>> bytes() { return Arbitraries.bytes().list().ofMinSize(4).ofMaxSize(4); }

    @Provide
    Arbitrary<Integer> lengthField() { return Arbitraries.of(lengthFields); }
}
