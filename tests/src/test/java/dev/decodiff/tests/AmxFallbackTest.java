package dev.decodiff.tests;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.metal.NativeKernels;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@code -Ddecodiff.amx=off} (read once, when the kernels load: hence a JVM of its own) puts the exact prefill back on
 * the FMA kernels: its dump has, tensor for tensor, the bits of {@code --matmul fp32-fma}, and says so in its kernels
 * field. Where the CPU has AMX, the default run differs from both in its prefill (the tiles sum in another order), so
 * the switch is not a no-op.
 */
class AmxFallbackTest {
    private static final Path CASE = ReferenceCases.repoRoot().resolve("reference-dumps/gemma4-tiny/short");

    @Test
    void amxOffGivesTheFmaKernelsBits(@TempDir Path tmp) throws Exception {
        Path off = tmp.resolve("off"), fma = tmp.resolve("fma"), dflt = tmp.resolve("default");
        String model = ReferenceCases.checkpointOf(CASE).toString();
        var cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--add-modules", "jdk.incubator.vector", "--enable-native-access=ALL-UNNAMED", "-Ddecodiff.amx=off",
                "-cp", System.getProperty("java.class.path"), "dev.decodiff.harness.cli.Main",
                "dump", "--model", model, "--reference", CASE.toString(), "--out", off.toString()));
        var p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String log = new String(p.getInputStream().readAllBytes());
        assertThat(p.waitFor(120, TimeUnit.SECONDS)).isTrue();
        assertThat(p.exitValue()).as(log).isZero();
        var r = Cli.run("dump", "--model", model, "--reference", CASE.toString(), "--matmul", "fp32-fma", "--out", fma.toString());
        assertThat(r.code()).as(r.toString()).isZero();

        assertThat(Files.readString(off.resolve("manifest.json"))).contains("AMX off (-Ddecodiff.amx=off)");
        List<Path> steps = steps(fma);
        assertThat(steps).isNotEmpty();
        for (Path s : steps) {
            var a = Files.readAllBytes(off.resolve(s.getFileName()));
            var b = Files.readAllBytes(s);
            assertThat(header(a)).as(s.getFileName().toString()).isEqualTo(header(b));
            assertThat(tensors(a)).as(s.getFileName().toString()).isEqualTo(tensors(b));
        }

        if (!NativeKernels.amxAvailable()) return;
        r = Cli.run("dump", "--model", model, "--reference", CASE.toString(), "--out", dflt.toString());
        assertThat(r.code()).as(r.toString()).isZero();
        assertThat(tensors(Files.readAllBytes(dflt.resolve("step-0000.safetensors")))).as("the default prefill runs on AMX tiles")
                .isNotEqualTo(tensors(Files.readAllBytes(fma.resolve("step-0000.safetensors"))));
    }

    /** A safetensors file's header (names, dtypes, shapes, offsets; its key order is the writer's map order, so parsed). */
    private static JsonNode header(byte[] file) throws Exception {
        long n = ByteBuffer.wrap(file, 0, 8).order(ByteOrder.LITTLE_ENDIAN).getLong();
        return new ObjectMapper().readTree(new String(file, 8, (int) n, StandardCharsets.UTF_8));
    }

    /** Its tensor bytes, every tensor's bits. */
    private static byte[] tensors(byte[] file) {
        long n = ByteBuffer.wrap(file, 0, 8).order(ByteOrder.LITTLE_ENDIAN).getLong();
        return Arrays.copyOfRange(file, 8 + (int) n, file.length);
    }

    private static List<Path> steps(Path dump) throws Exception {
        try (Stream<Path> s = Files.list(dump)) {
            return s.filter(f -> f.getFileName().toString().endsWith(".safetensors")).sorted().toList();
        }
    }
}
