package dev.decodiff.llamacpp.ffi;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.PaddingLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The layouts a build's own headers give: the pinned headers give the bindings' hand-written layouts; a header with a
 * field moved gives that field's new offset; a header without a field the bindings touch, or with a constant of another
 * value, is refused naming the difference. The edited headers are copies of the pinned ones, changed by one line.
 */
class LayoutProbeTest {
    @TempDir
    Path tmp;
    LlamaCppHome.Headers pinned;

    @BeforeEach
    void headers() {
        var home = LlamaCppTestSupport.requireHome();
        Assumptions.assumeTrue(LayoutProbe.onPath("gcc"), "gcc not found: the layout probe needs a C compiler");
        pinned = home.headers().orElseThrow();
    }

    @Test
    void thePinnedHeadersGiveTheBindingsOwnLayouts() {
        var probed = LayoutProbe.of(pinned, tmp.resolve("cache"));
        var own = LlamaLayouts.pinned();
        for (int i = 0; i < own.all().size(); i++) {
            var a = own.all().get(i);
            var b = probed.all().get(i);
            assertThat(b.byteSize()).as(a.name().orElseThrow()).isEqualTo(a.byteSize());
            for (MemoryLayout m : a.memberLayouts()) {
                if (m instanceof PaddingLayout) continue;
                String f = m.name().orElseThrow();
                assertThat(LlamaLayouts.offset(b, f)).as(a.name().orElseThrow() + "." + f).isEqualTo(LlamaLayouts.offset(a, f));
            }
        }
        // the answer is cached by the headers' hash: a second probe reads it back
        try (var files = Files.list(tmp.resolve("cache"))) {
            assertThat(files.filter(p -> p.toString().endsWith(".txt")).count()).isEqualTo(1);
        } catch (IOException e) {
            throw new AssertionError(e);
        }
        assertThat(LayoutProbe.of(pinned, tmp.resolve("cache")).contextParams().byteSize()).isEqualTo(own.contextParams().byteSize());
    }

    @Test
    void aFieldAddedBeforeTheOnesTheBindingsSetMovesThemAndTheStructKeepsItsCSize() throws IOException {
        var h = edited("llama.h", "        uint32_t n_ctx;", "        uint64_t a_new_field;\n        uint32_t n_ctx;");
        var probed = LayoutProbe.of(h, tmp.resolve("cache"));
        var own = LlamaLayouts.pinned().contextParams();
        // an 8-byte field at offset 0 pushes n_ctx (4 bytes) to 8, and the rest by 8; the struct grows by 8
        assertThat(LlamaLayouts.offset(probed.contextParams(), "n_ctx")).isEqualTo(8);
        assertThat(LlamaLayouts.offset(probed.contextParams(), "n_batch")).isEqualTo(12);
        assertThat(LlamaLayouts.offset(probed.contextParams(), "cb_eval")).isEqualTo(LlamaLayouts.offset(own, "cb_eval") + 8);
        assertThat(probed.contextParams().byteSize()).isEqualTo(own.byteSize() + 8);
    }

    @Test
    void aFieldTheBindingsSetThatTheHeaderLacksIsRefusedByName() throws IOException {
        var h = edited("llama.h", "        bool swa_full;", "        bool swa_full_renamed;");
        assertThatThrownBy(() -> LayoutProbe.of(h, tmp.resolve("cache"))).isInstanceOf(LlamaCppException.class)
                .hasMessageContaining("struct llama_context_params has no field 'swa_full'")
                .hasMessageContaining(h.llama().resolve("llama.h").toString());
    }

    @Test
    void aFieldOfAnotherSizeIsRefusedByName() throws IOException {
        var h = edited("llama.h", "        int32_t n_tokens;", "        int64_t n_tokens;");
        assertThatThrownBy(() -> LayoutProbe.of(h, tmp.resolve("cache"))).isInstanceOf(LlamaCppException.class)
                .hasMessageContaining("field 'n_tokens' of struct llama_batch is 8 bytes, the bindings read 4");
    }

    @Test
    void aConstantOfAnotherValueIsRefusedByName() throws IOException {
        var h = edited("ggml.h", "#   define GGML_MAX_NAME        64", "#   define GGML_MAX_NAME        128");
        assertThatThrownBy(() -> LayoutProbe.of(h, tmp.resolve("cache"))).isInstanceOf(LlamaCppException.class)
                .hasMessageContaining("GGML_MAX_NAME is 128, the bindings pass 64");
    }

    /** A copy of the pinned headers (llama.h and ggml/include/*) with one line of {@code file} replaced. */
    private LlamaCppHome.Headers edited(String file, String line, String replacement) throws IOException {
        Path inc = Files.createDirectories(tmp.resolve("include")), ggml = Files.createDirectories(tmp.resolve("ggml/include"));
        copyAll(pinned.llama(), inc);
        copyAll(pinned.ggml(), ggml);
        Path target = file.equals("llama.h") ? inc.resolve(file) : ggml.resolve(file);
        String text = Files.readString(target);
        assertThat(text).as("the pinned " + file + " has the line to edit").contains(line);
        Files.writeString(target, text.replace(line, replacement));
        return new LlamaCppHome.Headers(inc, ggml);
    }

    private static void copyAll(Path from, Path to) throws IOException {
        try (var files = Files.list(from)) {
            for (Path f : files.sorted(Comparator.naturalOrder()).toList())
                if (Files.isRegularFile(f)) Files.copy(f, to.resolve(f.getFileName()));
        }
    }
}
