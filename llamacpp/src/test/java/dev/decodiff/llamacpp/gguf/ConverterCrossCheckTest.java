package dev.decodiff.llamacpp.gguf;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.engine.Gemma4Config;
import dev.decodiff.llamacpp.ffi.LlamaCppHome;
import dev.decodiff.llamacpp.ffi.LlamaCppTestSupport;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The independent check of the metadata: llama.cpp's own Python converter code (its Gemma4Model, from the pinned
 * release's sources that scripts/llamacpp.sh caches) computes the metadata of each checkpoint and real shape, and
 * must agree with decodiff's file key by key: order, type and value, and the rope_freqs tensor. Runs wherever the
 * llama.cpp tests run (./run-tests), with the machine's python3 and numpy.
 */
class ConverterCrossCheckTest {
    @TempDir
    Path tmp;

    @ParameterizedTest
    @CsvSource({"checkpoint, gemma4-tiny, f32", "checkpoint, gemma4-tiny-ple, bf16", "checkpoint, gemma4-tiny-moe, f16",
            "shape, e2b, bf16", "shape, e4b, bf16", "shape, 26b-a4b, bf16", "shape, 31b, f32"})
    void llamaCppsConverterWritesTheSameMetadataAsDecodiff(String kind, String name, String type) throws Exception {
        var home = LlamaCppTestSupport.requireHome();
        // scripts/llamacpp.sh puts the converter beside its cache: <cache>-converter, next to <cache>/lib
        Path sources = Path.of(home.lib().getParent() + "-converter");
        Path script = Path.of(ConverterCrossCheckTest.class.getResource("/converter_crosscheck.py").toURI());
        // ./run-tests fetches it (scripts/llamacpp.sh --with-converter); a plain `mvn test` without it says how to get it
        if (System.getenv(LlamaCppHome.ENV) == null)
            Assumptions.assumeTrue(Files.isRegularFile(sources.resolve("conversion/gemma.py")),
                    "llama.cpp's converter is not cached: run scripts/llamacpp.sh --with-converter to run this check");
        assertThat(sources.resolve("conversion/gemma.py")).as("llama.cpp's converter (scripts/llamacpp.sh --with-converter caches it)").exists();
        Path dir, gguf = tmp.resolve(name + ".gguf");
        if (kind.equals("checkpoint")) {
            dir = Checkpoints.dir(name);
            HfToGguf.convert(dir, gguf, GgufOutputType.parse(type), false);
        } else {
            dir = planOnly(name, type, gguf);
        }
        String out = python(script.toString(), sources.toString(), dir.toString(), gguf.toString(), type);
        assertThat(out).as(out).contains("differences=0 order=True rope_freqs=True");
    }

    /** A real shape's metadata and rope_freqs, written without weights, beside a copy of its config.json named as the model. */
    private Path planOnly(String shape, String type, Path gguf) throws Exception {
        Path config = Path.of(ConverterCrossCheckTest.class.getResource("/real-shapes/" + shape + ".json").toURI());
        Path dir = Files.createDirectories(tmp.resolve(shape));
        Files.copy(config, dir.resolve("config.json"));
        var c = Gemma4Config.read(config);
        var plan = Gemma4GgufPlan.of(shape, new ObjectMapper().readTree(config.toFile()), config,
                LoaderExpectations.checkpointTensors(c, "model."), null, GgufOutputType.parse(type));
        var rope = plan.tensors().getFirst();
        assertThat(rope.name()).isEqualTo("rope_freqs.weight");
        GgufWriter.write(gguf, plan.metadata(), List.of(new GgufWriter.Tensor(rope.name(), rope.ne(), rope.type(),
                sink -> { for (float v : rope.values()) sink.f32(v); })), false);
        return dir;
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
