package dev.decodiff.tests;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.harness.cli.Main;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assumptions.assumeThat;

/**
 * `decodiff bench --size qwen35-tiny --json` end to end: it synthesizes the tiny Qwen3.5 checkpoint into the given
 * cache, converts it to MLX 4-bit (python3 with NumPy, as `bench --quantized` does), and prints every figure of both
 * models. No timing is asserted; only the report's structure, and that each figure is finite and positive.
 */
class QwenBenchSmokeTest {
    @Test
    void tinyQwenBenchPrintsEveryFigure(@TempDir Path cache) throws Exception {
        assumeThat(numpy()).as("python3 with NumPy (the MLX conversion)").isTrue();
        var out = new StringWriter();
        var err = new StringWriter();
        int code = Main.commandLine(new PrintWriter(out, true), new PrintWriter(err, true))
                .execute("bench", "--size", "qwen35-tiny", "--json", "--cache", cache.toString(), "--decode-steps", "2", "--repeats", "1");
        assertThat(code).as(err.toString()).isZero();
        JsonNode j = new ObjectMapper().readTree(out.toString());
        for (String k : List.of("read_bandwidth_best_gbs", "read_bandwidth_weights_gbs", "read_bandwidth_anonymous_gbs", "read_bandwidth_during_decode_gbs",
                "peak_rss_bytes", "parameters"))
            assertPositive(j, k);
        assertThat(j.get("model").asText()).contains("qwen35-tiny");
        for (String k : List.of("read_bandwidth_weights_gbs", "read_bandwidth_anonymous_gbs", "read_bandwidth_during_decode_gbs"))
            assertThat(j.get("read_bandwidth_best_gbs").asDouble()).as(k).isGreaterThanOrEqualTo(j.get("figures").get(k).get("max").asDouble());
        // the passes between rounds are among those the best is taken from: their median is a share of it
        assertThat(j.get("read_during_decode_over_best_read_pass").asDouble()).isPositive().isLessThanOrEqualTo(1.0)
                .isCloseTo(j.get("read_bandwidth_during_decode_gbs").asDouble() / j.get("read_bandwidth_best_gbs").asDouble(),
                        org.assertj.core.data.Percentage.withPercentage(1e-6));
        assertThat(j.get("models")).hasSize(2);
        assertThat(j.get("models").get(0).get("name").asText()).isEqualTo("bf16");
        assertThat(j.get("models").get(1).get("name").asText()).isEqualTo("4-bit");
        // the 4-bit conversion reads fewer bytes a token than bf16
        assertThat(j.get("models").get(1).get("bytes_per_token").asLong()).isLessThan(j.get("models").get(0).get("bytes_per_token").asLong());
        for (var m : j.get("models")) {
            assertPositive(m, "bytes_per_token");
            assertPositive(m, "prefill_tokens_per_s");
            assertPositive(m, "kernels_alone_over_round_read_pass");
            for (String c : List.of("128", "512", "2048")) {
                for (String k : List.of("decode_tokens_per_s", "decode_weight_gbs", "decode_over_best_read_pass", "decode_over_round_read_pass",
                        "recurrent_ms_per_token", "recurrent_share_of_step", "decode_over_kernels_alone"))
                    assertPositive(m.get(k), c);
                // the recurrent step is part of the step; the ratio is the step's traffic over the best pass
                assertThat(m.get("recurrent_share_of_step").get(c).asDouble()).isLessThanOrEqualTo(1.0);
                assertThat(m.get("decode_over_best_read_pass").get(c).asDouble()).isCloseTo(
                        m.get("decode_weight_gbs").get(c).asDouble() / j.get("read_bandwidth_best_gbs").asDouble(),
                        org.assertj.core.data.Percentage.withPercentage(1e-6));
            }
            assertThat(j.get("targets").has(m.get("name").asText() + "_decode_128_ge_0.9_of_best_read_pass")).isTrue();
        }
        assertThat(j.get("figures").get("bf16_decode_2048_tokens_per_s").get("samples").asInt()).isEqualTo(2);
        // the checkpoint and its conversion are cached under the spec key, complete, with no temporary leftovers
        try (var s = Files.list(cache)) {
            var entries = s.map(p -> p.getFileName().toString()).sorted().toList();
            assertThat(entries).hasSize(2);
            assertThat(entries.get(1)).isEqualTo(entries.get(0) + ".mlx4");
            assertThat(entries).noneMatch(e -> e.contains("partial"));
        }
    }

    private static void assertPositive(JsonNode j, String key) {
        assertThat(j.has(key)).as(key).isTrue();
        double v = j.get(key).asDouble();
        assertThat(Double.isFinite(v) && v > 0).as(key + " = " + v).isTrue();
    }

    private static boolean numpy() {
        try {
            var p = new ProcessBuilder("python3", "-c", "import numpy").redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
            return p.waitFor() == 0;
        } catch (Exception e) {
            return false;
        }
    }

    /** The bf16 model beside llama.cpp (the same weights as a bf16 GGUF), rounds interleaved: decodiff's figures over llama.cpp's. */
    @Test
    void qwenBenchAgainstLlamaCppGivesDecodiffOverLlamaCppPerContext(@TempDir Path cache) throws Exception {
        assumeThat(numpy()).as("python3 with NumPy (the MLX conversion)").isTrue();
        LlamaCppSetUp.assumeAvailable();
        var out = new StringWriter();
        var err = new StringWriter();
        int code = Main.commandLine(new PrintWriter(out, true), new PrintWriter(err, true))
                .execute("bench", "--size", "qwen35-tiny", "--against", "llama.cpp", "--json", "--cache", cache.toString(), "--decode-steps", "2", "--repeats", "2");
        assertThat(code).as(err.toString()).isZero();
        JsonNode j = new ObjectMapper().readTree(out.toString());
        var a = j.get("against_llamacpp");
        assertThat(a.get("rounds").asInt()).isEqualTo(2);
        assertThat(a.get("kv_types").asText()).isEqualTo("f32");
        var fig = j.get("figures");
        double best = j.get("read_bandwidth_best_gbs").asDouble();
        long bytes = j.get("models").get(0).get("bytes_per_token").asLong();
        for (String c : List.of("128", "512", "2048")) {
            assertPositive(a.get("decode_vs_llamacpp"), c);
            assertThat(a.get("per_round_vs_llamacpp").get("decode_" + c)).hasSize(2);
            assertRatiosOf(a.get("decode_vs_llamacpp").get(c).asDouble(), a.get("per_round_vs_llamacpp").get("decode_" + c),
                    fig.get("against_decodiff_decode_tokens_per_s_" + c), fig.get("against_llamacpp_decode_tokens_per_s_" + c));
            // llama.cpp's figure is the faster flash-attention setting's, and its traffic is the bf16 model's over the best pass
            double auto = fig.get("against_llamacpp_flash_auto_decode_tokens_per_s_" + c).get("median").asDouble();
            double off = fig.get("against_llamacpp_flash_off_decode_tokens_per_s_" + c).get("median").asDouble();
            double theirs = fig.get("against_llamacpp_decode_tokens_per_s_" + c).get("median").asDouble();
            assertThat(theirs).isEqualTo(Math.max(auto, off)).isEqualTo(a.get("llamacpp_decode_tokens_per_s").get(c).asDouble());
            assertThat(a.get("flash_attn_used").get("decode_" + c).asText()).isEqualTo(off > auto ? "off" : "auto (on)");
            assertThat(a.get("llamacpp_decode_over_best_read_pass").get(c).asDouble()).isCloseTo(bytes / 1e9 * theirs / best,
                    org.assertj.core.data.Percentage.withPercentage(1e-6));
            assertPositive(fig.get("against_decodiff_decode_tokens_per_s_" + c), "median");
        }
        assertPositive(a, "prefill_vs_llamacpp");
        assertPositive(a, "llamacpp_prefill_tokens_per_s");
        assertThat(a.get("per_round_vs_llamacpp").get("prefill_512")).hasSize(2);
        assertRatiosOf(a.get("prefill_vs_llamacpp").asDouble(), a.get("per_round_vs_llamacpp").get("prefill_512"),
                fig.get("against_decodiff_prefill_tokens_per_s"), fig.get("against_llamacpp_prefill_tokens_per_s"));
        assertThat(a.get("cpu_backend").asText()).isNotBlank();
    }

    /**
     * Each round's ratio is decodiff's figure of that round over llama.cpp's: it lies between the lowest decodiff figure
     * over the highest llama.cpp one and the other way round (an inverted ratio, llama.cpp over decodiff, does not,
     * unless both engines ran at one speed), and the reported ratio is a median of the rounds' (between their extremes).
     */
    private static void assertRatiosOf(double median, JsonNode perRound, JsonNode ours, JsonNode theirs) {
        double lo = ours.get("min").asDouble() / theirs.get("max").asDouble(), hi = ours.get("max").asDouble() / theirs.get("min").asDouble();
        double least = Double.POSITIVE_INFINITY, most = 0;
        for (JsonNode r : perRound) {
            assertThat(r.asDouble()).isBetween(lo * (1 - 1e-9), hi * (1 + 1e-9));
            least = Math.min(least, r.asDouble());
            most = Math.max(most, r.asDouble());
        }
        assertThat(median).isBetween(least, most);
    }
}
