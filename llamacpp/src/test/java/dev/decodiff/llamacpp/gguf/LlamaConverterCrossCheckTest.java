package dev.decodiff.llamacpp.gguf;

import dev.decodiff.llamacpp.ffi.LlamaCppHome;
import dev.decodiff.llamacpp.ffi.LlamaCppTestSupport;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The independent check of the Llama family's GGUF: llama.cpp's own Python converter code (LlamaModel for llama-tiny,
 * Qwen3Model for qwen3-tiny, from the pinned release's sources that scripts/llamacpp.sh caches) computes the metadata
 * and every tensor of each bundled checkpoint — its q/k permute and llama3 rope factors included — and decodiff's file
 * must agree key by key (order, type, value) and tensor by tensor, bit for bit. Runs wherever the llama.cpp tests run,
 * with the machine's python3 and numpy.
 */
class LlamaConverterCrossCheckTest {
    @TempDir
    Path tmp;

    @ParameterizedTest
    @ValueSource(strings = {"llama-tiny", "qwen3-tiny"})
    void llamaCppsConverterWritesTheSameFileAsDecodiff(String name) throws Exception {
        var home = LlamaCppTestSupport.requireHome();
        // scripts/llamacpp.sh puts the converter beside its cache: <cache>-converter, next to <cache>/lib
        Path sources = Path.of(home.lib().getParent() + "-converter");
        Path script = Path.of(LlamaConverterCrossCheckTest.class.getResource("/llama_converter_crosscheck.py").toURI());
        if (System.getenv(LlamaCppHome.ENV) == null)
            Assumptions.assumeTrue(Files.isRegularFile(sources.resolve("conversion/llama.py")),
                    "llama.cpp's converter is not cached: run scripts/llamacpp.sh --with-converter to run this check");
        assertThat(sources.resolve("conversion/llama.py")).as("llama.cpp's converter (scripts/llamacpp.sh --with-converter caches it)").exists();
        Path dir = Checkpoints.dir(name), gguf = tmp.resolve(name + ".gguf");
        HfToGguf.convert(dir, gguf, GgufOutputType.parse("f32"), false);
        String out = python(script.toString(), sources.toString(), dir.toString(), gguf.toString());
        assertThat(out).as(out).contains("differences=0 order=True").contains("tensor_differences=0");
        // the converter produced every tensor (so the comparison above is not of two empty sets)
        assertThat(out).doesNotContain("tensors=0 ");
    }

    private static String python(String... args) throws IOException, InterruptedException {
        var cmd = new java.util.ArrayList<>(List.of("python3"));
        cmd.addAll(List.of(args));
        Process p;
        try {
            p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        } catch (IOException e) {
            Assumptions.assumeTrue(System.getenv(LlamaCppHome.ENV) == null, "python3 is needed for the converter cross-check: " + e.getMessage());
            throw e;
        }
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(120, TimeUnit.SECONDS)).isTrue();
        return out;
    }
}
