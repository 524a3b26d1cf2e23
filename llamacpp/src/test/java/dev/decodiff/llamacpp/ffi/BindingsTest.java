package dev.decodiff.llamacpp.ffi;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The bindings against the pinned llama.cpp: library and backend loading, model loading, refusals without a crash. */
class BindingsTest {
    @TempDir
    Path tmp;

    private static Path vocabFixture(LlamaCppHome home) {
        return home.sources().resolve("models/ggml-vocab-llama-spm.gguf");
    }

    @Test
    void theLibraryLoadsAndPicksACpuBackendForThisMachine() {
        LlamaCppTestSupport.requireHome();
        var lib = LlamaLibrary.get();
        assertThat(lib.backend()).startsWith("libggml-cpu-").endsWith(".so");
        assertThat(lib.systemInfo()).contains("CPU");
    }

    @Test
    void aVocabularyOnlyGgufLoadsWithTheTokenCountItsMetadataLists() throws IOException {
        var home = LlamaCppTestSupport.requireHome();
        Path gguf = vocabFixture(home);
        try (var m = LlamaModel.load(LlamaLibrary.get(), gguf, true)) {
            assertThat(m.architecture()).isEqualTo("llama");
            assertThat(m.meta("general.architecture")).isEqualTo("llama");
            assertThat(m.vocabSize()).isEqualTo(arrayLength(gguf, "tokenizer.ggml.tokens"));
            assertThat(m.meta("no.such.key")).isNull();
        }
    }

    @Test
    void aGgufWithoutWeightsIsRefusedWithLlamaCppsReasonAndTheJvmLives() {
        var home = LlamaCppTestSupport.requireHome();
        Path gguf = vocabFixture(home);
        assertThatThrownBy(() -> LlamaModel.load(LlamaLibrary.get(), gguf, false))
                .isInstanceOf(LlamaCppException.class)
                .hasMessageContaining(gguf.toString()).hasMessageContaining("refused").hasMessageContaining("decodiff gguf");
        // the library still works after the refusal
        try (var m = LlamaModel.load(LlamaLibrary.get(), gguf, true)) {
            assertThat(m.vocabSize()).isPositive();
        }
    }

    @Test
    void aTruncatedOrForeignFileIsRefusedBeforeLlamaCppSeesIt() throws IOException {
        var home = LlamaCppTestSupport.requireHome();
        byte[] whole = Files.readAllBytes(vocabFixture(home));
        Path cut = tmp.resolve("cut.gguf");
        Files.write(cut, java.util.Arrays.copyOf(whole, 4096));
        assertThatThrownBy(() -> LlamaModel.load(LlamaLibrary.get(), cut, true))
                .isInstanceOf(LlamaCppException.class).hasMessageContaining(cut.toString()).hasMessageContaining("truncated");
        Path text = tmp.resolve("model.safetensors");
        Files.writeString(text, "not a gguf at all");
        assertThatThrownBy(() -> LlamaModel.load(LlamaLibrary.get(), text, true))
                .isInstanceOf(LlamaCppException.class).hasMessageContaining("is not a GGUF file");
        assertThatThrownBy(() -> LlamaModel.load(LlamaLibrary.get(), tmp.resolve("absent.gguf"), true))
                .isInstanceOf(LlamaCppException.class).hasMessageContaining("does not exist");
    }

    @Test
    void aLibraryFolderWithoutLlamaCppNamesTheSetUpScript() {
        LlamaCppTestSupport.requireHome();
        String saved = System.getProperty(LlamaCppHome.PROPERTY);
        System.setProperty(LlamaCppHome.PROPERTY, tmp.toString());
        try {
            assertThatThrownBy(LlamaCppHome::locate).isInstanceOf(LlamaCppException.class)
                    .hasMessageContaining("no libllama.v0.5.0.so or libllama.so in " + tmp).hasMessageContaining("scripts/llamacpp.sh")
                    .hasMessageContaining("-D" + LlamaCppHome.PROPERTY);
        } finally {
            if (saved == null) System.clearProperty(LlamaCppHome.PROPERTY);
            else System.setProperty(LlamaCppHome.PROPERTY, saved);
        }
    }

    /** The element count of a metadata array, read here independently of GgufPreflight and of llama.cpp. */
    static long arrayLength(Path gguf, String key) throws IOException {
        try (var ch = FileChannel.open(gguf)) {
            var b = ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size()).order(ByteOrder.LITTLE_ENDIAN);
            b.position(16);
            long kvs = b.getLong();
            for (long i = 0; i < kvs; i++) {
                String k = str(b);
                int type = b.getInt();
                if (type == 9) {
                    int elem = b.getInt();
                    long n = b.getLong();
                    if (k.equals(key)) return n;
                    for (long j = 0; j < n; j++) skip(b, elem);
                } else {
                    if (k.equals(key)) throw new IOException(key + " is not an array");
                    skip(b, type);
                }
            }
            throw new IOException(key + " not found in " + gguf);
        }
    }

    private static String str(ByteBuffer b) {
        byte[] s = new byte[(int) b.getLong()];
        b.get(s);
        return new String(s, StandardCharsets.UTF_8);
    }

    private static void skip(ByteBuffer b, int type) {
        switch (type) {
            case 0, 1, 7 -> b.position(b.position() + 1);
            case 2, 3 -> b.position(b.position() + 2);
            case 4, 5, 6 -> b.position(b.position() + 4);
            case 10, 11, 12 -> b.position(b.position() + 8);
            case 8 -> str(b);
            default -> throw new IllegalStateException("type " + type);
        }
    }
}
