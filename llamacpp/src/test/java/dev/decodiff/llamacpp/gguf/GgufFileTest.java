package dev.decodiff.llamacpp.gguf;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.SplittableRandom;
import java.util.function.Consumer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.fail;

/** The reader against hand-made and damaged files: every damage is a GgufException naming the file, never another failure. */
class GgufFileTest {
    @TempDir
    static Path tmp;
    static Path valid;
    static byte[] bytes;
    /** Byte offsets in {@link #bytes} (a file with 2 metadata entries and 2 tensors), found by hand from the format. */
    static int kvStart = 24, tensorInfoStart, dataStart;

    @BeforeAll
    static void writeASmallValidFile() throws IOException {
        var md = new LinkedHashMap<String, GgufValue>();
        md.put("general.architecture", GgufValue.string("gemma4"));
        md.put("a.list", GgufValue.i32Array(List.of(1, 2, 3)));
        var tensors = List.of(
                new GgufWriter.Tensor("w", new long[]{3, 2}, GgmlType.F32, s -> { for (int i = 0; i < 6; i++) s.f32(i + 0.5f); }),
                new GgufWriter.Tensor("b", new long[]{5}, GgmlType.F16, s -> { for (int i = 0; i < 5; i++) s.u16(Float.floatToFloat16(-i)); }));
        valid = tmp.resolve("small.gguf");
        GgufWriter.write(valid, md, tensors, false);
        bytes = Files.readAllBytes(valid);
        // kv: key "general.architecture" (8 + 20) + type 4 + string (8 + 6); "a.list" (8 + 6) + type 4 + item type 4 + n 8 + 3×4
        tensorInfoStart = kvStart + (8 + 20 + 4 + 8 + 6) + (8 + 6 + 4 + 4 + 8 + 12);
        dataStart = (int) GgufFile.align(tensorInfoStart + (8 + 1 + 4 + 2 * 8 + 4 + 8) + (8 + 1 + 4 + 8 + 4 + 8), 32);
    }

    @Test
    void aWrittenFileReadsBackWithItsMetadataTensorsAndData() {
        var f = GgufFile.read(valid);
        assertThat(f.version()).isEqualTo(3);
        assertThat(f.metadata().keySet()).containsExactly("general.architecture", "a.list");
        assertThat(f.get("a.list").asList()).isEqualTo(List.of(1L, 2L, 3L));
        assertThat(f.dataOffset()).isEqualTo(dataStart);
        assertThat(f.tensor("w").ne()).containsExactly(3, 2);
        assertThat(f.tensor("b").offset()).as("6 floats = 24 bytes, padded to 32").isEqualTo(32);
        assertThat(f.floats("w")).containsExactly(0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f);
        assertThat(f.floats("b")).containsExactly(0f, -1f, -2f, -3f, -4f);
        assertThat(bytes.length).as("the last tensor is padded too, as gguf-py does").isEqualTo(dataStart + 64);
    }

    @Test
    void everyTruncationIsRefusedNamingTheFile() {
        for (int n = 0; n < bytes.length - 32; n++) {
            int len = n;
            assertRefused(java.util.Arrays.copyOf(bytes, len), "truncated to " + len + " bytes", m -> { });
        }
    }

    @Test
    void randomCorruptionIsEitherReadOrRefusedWithAGgufExceptionNeverAnotherFailure() {
        var rnd = new SplittableRandom(20261130);
        int refused = 0;
        for (int i = 0; i < 3000; i++) {
            byte[] b = bytes.clone();
            int flips = 1 + rnd.nextInt(4);
            for (int k = 0; k < flips; k++) b[rnd.nextInt(dataStart)] = (byte) rnd.nextInt(256);
            try {
                GgufFile.parse(valid, MemorySegment.ofArray(b));
            } catch (GgufException e) {
                assertThat(e.getMessage()).startsWith(valid.toString());
                refused++;
            } catch (RuntimeException | OutOfMemoryError e) {
                fail("corruption " + i + " gave " + e, e);
            }
        }
        assertThat(refused).as("most random corruptions of the header are caught").isGreaterThan(1000);
    }

    @Test
    void aWrongMagicSaysItIsNotAGgufFile() {
        byte[] b = bytes.clone();
        b[0] = 'X';
        assertRefused(b, "magic", m -> assertThat(m).contains("not a GGUF file"));
    }

    @Test
    void anOldVersionIsRefusedWithTheFix() {
        assertRefused(patchU32(4, 1), "version 1", m -> assertThat(m).contains("version 1").contains("re-convert"));
    }

    @Test
    void countsTheFileCannotHoldAreRefusedBeforeAnythingIsAllocated() {
        assertRefused(patchU64(8, 1L << 40), "tensor count", m -> assertThat(m).contains("tensor infos"));
        assertRefused(patchU64(16, Long.MAX_VALUE), "metadata count", m -> assertThat(m).contains("metadata entries"));
        assertRefused(patchU64(kvStart, -1L), "key length 2^64-1", m -> assertThat(m).contains("truncated or corrupted"));
        int listLength = kvStart + 8 + 20 + 4 + 8 + 6 + 8 + 6 + 4 + 4;
        assertRefused(patchU64(listLength, 1L << 61), "array length", m -> assertThat(m).contains("items in 'a.list'"));
    }

    @Test
    void aDuplicateKeyIsRefused() {
        // the first entry twice, in a file that says it has three
        byte[] entry = java.util.Arrays.copyOfRange(bytes, kvStart, kvStart + 8 + 20 + 4 + 8 + 6);
        var out = ByteBuffer.allocate(bytes.length + entry.length).order(ByteOrder.LITTLE_ENDIAN);
        out.put(bytes, 0, kvStart).put(entry).put(bytes, kvStart, bytes.length - kvStart);
        byte[] dup = out.array();
        ByteBuffer.wrap(dup).order(ByteOrder.LITTLE_ENDIAN).putLong(16, 3);
        assertRefused(dup, "duplicate key", m -> assertThat(m).contains("'general.architecture' appears twice"));
    }

    @Test
    void badTensorInfosAreRefusedWithTheTensorsName() {
        int w = tensorInfoStart + 8 + 1; // after the name "w": n_dims
        assertRefused(patchU32(w, 5), "5 dimensions", m -> assertThat(m).contains("'w' has 5 dimensions"));
        assertRefused(patchU32(w + 4 + 16, 99), "type 99", m -> assertThat(m).contains("'w' has ggml type id 99"));
        // rows of 3 values cannot hold a Q5_0 block (32) or a Q4_K super-block (256)
        assertRefused(patchU32(w + 4 + 16, GgmlType.Q5_0.id()), "Q5_0 rows of 3", m -> assertThat(m).contains("'w'")
                .contains("Q5_0 rows need a multiple of 32 elements, got 3").contains("damaged"));
        assertRefused(patchU32(w + 4 + 16, GgmlType.Q4_K.id()), "Q4_K rows of 3", m -> assertThat(m).contains("'w'")
                .contains("Q4_K rows need a multiple of 256 elements, got 3"));
        assertRefused(patchU64(w + 4 + 16 + 4, 8), "misaligned", m -> assertThat(m).contains("not a multiple of the alignment 32"));
        assertRefused(patchU64(w + 4, 1L << 62), "huge dimension", m -> assertThat(m).contains("'w'"));
        assertRefused(patchU64(w + 4 + 16 + 4, 32), "overlap", m -> assertThat(m).contains("overlap"));
        int b = w + 4 + 16 + 4 + 8 + 8 + 1;
        assertRefused(patchU64(b + 4 + 8 + 4, 1024), "past the end", m -> assertThat(m).contains("'b'").contains("past the end"));
    }

    @Test
    void aMissingFileIsNamed() {
        assertThatThrownBy(() -> GgufFile.read(tmp.resolve("nope.gguf"))).isInstanceOf(GgufException.class).hasMessageContaining("nope.gguf");
    }

    private static byte[] patchU32(int at, long v) {
        byte[] b = bytes.clone();
        ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).putInt(at, (int) v);
        return b;
    }

    private static byte[] patchU64(int at, long v) {
        byte[] b = bytes.clone();
        ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).putLong(at, v);
        return b;
    }

    private static void assertRefused(byte[] b, String what, Consumer<String> message) {
        try {
            GgufFile.parse(valid, MemorySegment.ofArray(b));
        } catch (GgufException e) {
            assertThat(e.getMessage()).as(what).startsWith(valid.toString());
            message.accept(e.getMessage());
            return;
        }
        fail(what + ": read without complaint");
    }
}
