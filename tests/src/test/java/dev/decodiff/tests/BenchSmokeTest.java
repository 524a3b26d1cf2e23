package dev.decodiff.tests;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.harness.cli.Main;
import dev.decodiff.llamacpp.ffi.LlamaCppHome;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * `decodiff bench --size small --json` end to end: it synthesizes its checkpoint into the given cache, runs every
 * measurement and prints every figure of issue 5. No timing is asserted (speed is for the bench to report, not for
 * a unit test to guess); only that each figure is there, finite and positive.
 */
class BenchSmokeTest {
    @Test
    void smallBenchPrintsEveryFigure(@TempDir Path cache) throws Exception {
        var out = new StringWriter();
        var err = new StringWriter();
        int code = Main.commandLine(new PrintWriter(out, true), new PrintWriter(err, true))
                .execute("bench", "--size", "small", "--json", "--cache", cache.toString(), "--decode-steps", "2", "--repeats", "1");
        assertThat(code).as(err.toString()).isZero();
        JsonNode j = new ObjectMapper().readTree(out.toString());
        for (String k : List.of("read_bandwidth_gbs", "decode_weight_gbs", "decode_bandwidth_ratio", "decode_2048_over_128",
                "prefill_over_decode", "idle_probe_overhead", "compare_bandwidth_ratio", "peak_rss_bytes",
                // the ceilings: best and median read of the weights, anonymous memory, FMA peak and a prefill GEMM
                "read_bandwidth_best_gbs", "read_bandwidth_anonymous_gbs", "fma_peak_gflops", "gemm_gflops", "gemm_over_fma_peak"))
            assertPositive(j, k);
        // the best pass is a pass: at least the median, and the decode ratio is taken against it
        assertThat(j.get("read_bandwidth_best_gbs").asDouble()).isGreaterThanOrEqualTo(j.get("read_bandwidth_gbs").asDouble());
        // the ceiling is the best pass of every reader, the passes between decode rounds and over the mapped file included
        for (String k : List.of("read_bandwidth_during_decode_best_gbs", "read_bandwidth_weights_best_gbs", "read_bandwidth_anonymous_best_gbs"))
            assertThat(j.get("read_bandwidth_best_gbs").asDouble()).as(k).isGreaterThanOrEqualTo(j.get(k).asDouble());
        if (j.has("read_bandwidth_mapped_file_best_gbs"))
            assertThat(j.get("read_bandwidth_best_gbs").asDouble()).isGreaterThanOrEqualTo(j.get("read_bandwidth_mapped_file_best_gbs").asDouble());
        assertThat(j.get("weights_placement").asText()).isNotBlank();
        assertThat(j.get("decode_bandwidth_ratio").asDouble())
                .isCloseTo(j.get("decode_weight_gbs").asDouble() / j.get("read_bandwidth_best_gbs").asDouble(), org.assertj.core.data.Percentage.withPercentage(1e-6));
        for (String c : List.of("128", "512", "2048")) assertPositive(j.get("decode_tokens_per_s"), c);
        // issue 6 point 4: prefix-reuse and second-turn time to first token, and each KV type's memory and speed
        for (String k : List.of("ttft_cold_s", "ttft_prefix_reuse_s", "prefix_reuse_speedup", "ttft_second_turn_s", "second_turn_speedup"))
            assertPositive(j, k);
        for (String t : List.of("f32", "bf16", "q8_0", "q4_0"))
            for (String k : List.of("kv_bytes_per_token", "kv_prefill_tokens_per_s", "kv_prefill_over_f32", "kv_decode_512_tokens_per_s"))
                assertPositive(j.get(k), t);
        assertThat(j.get("kv_bytes_per_token").get("q4_0").asLong()).isLessThan(j.get("kv_bytes_per_token").get("f32").asLong());
        // every type, f32 too, decoded in the same stretch at 512 and 2048, with its paired ratio to f32
        for (String c : List.of("512", "2048"))
            for (String t : List.of("f32", "bf16", "q8_0", "q4_0")) {
                assertPositive(j.get("kv_decode_" + c + "_tokens_per_s"), t);
                assertPositive(j.get("kv_decode_over_f32").get(c), t);
            }
        assertThat(j.get("kv_decode_over_f32").get("2048").get("f32").asDouble()).as("f32 over itself, step by step").isEqualTo(1.0);
        assertThat(j.get("figures").get("kv_decode_2048_tokens_per_s_q8_0").get("samples").asInt()).isEqualTo(4); // 2 × --decode-steps
        assertThat(j.get("targets").has("quantized_kv_decode_2048_ge_f32")).isTrue();
        // the one-shot `decodiff run` in a fresh JVM against the same prefill warm: its wall time holds its prefill
        for (String k : List.of("one_shot_prefill_tokens_per_s", "one_shot_warm_prefill_tokens_per_s", "one_shot_prefill_over_warm",
                "one_shot_wall_s", "one_shot_outside_prefill_s"))
            assertPositive(j, k);
        assertThat(j.get("one_shot_wall_s").asDouble()).isGreaterThan(512 / j.get("one_shot_prefill_tokens_per_s").asDouble());
        assertThat(j.get("one_shot_prefill_over_warm").asDouble()).isCloseTo(
                j.get("one_shot_warm_prefill_tokens_per_s").asDouble() / j.get("one_shot_prefill_tokens_per_s").asDouble(),
                org.assertj.core.data.Percentage.withPercentage(1e-6));
        assertThat(j.get("figures").get("read_bandwidth_gbs").get("min").asDouble()).isPositive();
        // the checkpoint is cached under its spec key, complete, with no temporary leftovers
        try (var s = Files.list(cache)) {
            var entries = s.toList();
            assertThat(entries).hasSize(1);
            assertThat(entries.getFirst().resolve("model.safetensors")).isRegularFile();
            assertThat(entries.getFirst().getFileName().toString()).doesNotContain("partial");
        }
    }

    @Test
    void coreBenchMeasuresTheCeilingsPrefillAndDecodeOnly(@TempDir Path cache) throws Exception {
        var out = new StringWriter();
        var err = new StringWriter();
        int code = Main.commandLine(new PrintWriter(out, true), new PrintWriter(err, true))
                .execute("bench", "--size", "small,hidden=128,ffn=256,vocab=4096,head_dim=32,global_head_dim=64,layers=2", "--core", "--json",
                        "--cache", cache.toString(), "--decode-steps", "2", "--repeats", "1");
        assertThat(code).as(err.toString()).isZero();
        JsonNode j = new ObjectMapper().readTree(out.toString());
        for (String k : List.of("read_bandwidth_best_gbs", "fma_peak_gflops", "gemm_gflops", "prefill_tokens_per_s", "peak_rss_bytes"))
            assertPositive(j, k);
        for (String c : List.of("128", "512", "2048")) assertPositive(j.get("decode_tokens_per_s"), c);
        for (String k : List.of("compare_gbs", "idle_probe_overhead", "ttft_prefix_reuse_s", "kv_bytes_per_token", "one_shot_wall_s"))
            assertThat(j.has(k)).as("%s left out under --core", k).isFalse();
    }

    @Test
    void benchAgainstLlamaCppGivesDecodiffOverLlamaCppPerContextAndForPrefill(@TempDir Path cache) throws Exception {
        LlamaCppSetUp.assumeAvailable();
        var out = new StringWriter();
        var err = new StringWriter();
        int code = Main.commandLine(new PrintWriter(out, true), new PrintWriter(err, true))
                .execute("bench", "--size", "small", "--core", "--against", "llama.cpp", "--json", "--cache", cache.toString(),
                        "--decode-steps", "2", "--repeats", "2");
        assertThat(code).as(err.toString()).isZero();
        JsonNode j = new ObjectMapper().readTree(out.toString());
        for (String c : List.of("128", "512", "2048")) {
            assertPositive(j.get("decode_vs_llamacpp"), c);
            assertThat(j.get("per_round_vs_llamacpp").get("decode_" + c)).hasSize(2);
            // the ratio is decodiff's figure over llama.cpp's, both measured
            assertPositive(j.get("figures").get("against_llamacpp_decode_tokens_per_s_" + c), "median");
            assertPositive(j.get("figures").get("against_decodiff_decode_tokens_per_s_" + c), "median");
        }
        assertPositive(j, "prefill_vs_llamacpp");
        assertThat(j.get("per_round_vs_llamacpp").get("prefill_512")).hasSize(2);
        for (JsonNode r : j.get("per_round_vs_llamacpp").get("prefill_512")) assertThat(r.asDouble()).isPositive().isFinite();
        // the 16-bit pair: decodiff's bf16 K/V against llama.cpp's default f16 K/V
        for (String k : List.of("decode_512", "prefill_512")) assertPositive(j.get("bf16_kv_vs_llamacpp_f16_kv"), k);
        // decodiff's --matmul bf16 prefill against the same llama.cpp prefill, per round
        assertPositive(j, "prefill_bf16_matmul_vs_llamacpp");
        assertThat(j.get("per_round_vs_llamacpp").get("prefill_bf16_matmul_512")).hasSize(2);
        assertPositive(j.get("figures").get("against_decodiff_bf16_matmul_prefill_tokens_per_s"), "median");
        // the CPU backend llama.cpp loaded is one of the variants in its library folder
        String backend = j.get("llamacpp_cpu_backend").asText();
        assertThat(LlamaCppHome.locate().lib().resolve(backend)).as(backend).isRegularFile();
        assertThat(backend).startsWith("libggml-cpu-");
        // llama.cpp's CPU backend computes flash attention, so llama-bench's "auto" resolves to on
        var settings = j.get("llamacpp_settings");
        assertThat(settings.get("flash_attn_auto_resolved").asText()).isEqualTo("on");
        assertThat(settings.get("outputs").asText()).isEqualTo("last token");
        // each llama.cpp figure is the faster flash-attention setting's: its median is at least the other's
        var fig = j.get("figures");
        for (String c : List.of("128", "512", "2048")) {
            double auto = fig.get("against_llamacpp_flash_auto_decode_tokens_per_s_" + c).get("median").asDouble();
            double off = fig.get("against_llamacpp_flash_off_decode_tokens_per_s_" + c).get("median").asDouble();
            assertThat(fig.get("against_llamacpp_decode_tokens_per_s_" + c).get("median").asDouble()).isEqualTo(Math.max(auto, off));
            assertThat(settings.get("flash_attn_used").get("decode_" + c).asText()).isEqualTo(off > auto ? "off" : "auto (on)");
        }
        double auto = fig.get("against_llamacpp_flash_auto_prefill_tokens_per_s").get("median").asDouble();
        double off = fig.get("against_llamacpp_flash_off_prefill_tokens_per_s").get("median").asDouble();
        assertThat(fig.get("against_llamacpp_prefill_tokens_per_s").get("median").asDouble()).isEqualTo(Math.max(auto, off));
    }

    @Test
    void compareRssMeasuresALiveCompareInItsOwnJvmAndKeepsTheReferenceOnlyWhenAsked(@TempDir Path cache) throws Exception {
        String size = "small,hidden=128,ffn=256,vocab=4096,head_dim=32,global_head_dim=64,layers=2";
        for (int run = 0; run < 3; run++) {
            boolean keep = run > 0;
            var out = new StringWriter();
            var err = new StringWriter();
            var args = new java.util.ArrayList<>(List.of("bench", "--size", size, "--compare-rss", "600", "--json", "--cache", cache.toString()));
            if (keep) args.add("--keep-reference");
            int code = Main.commandLine(new PrintWriter(out, true), new PrintWriter(err, true)).execute(args.toArray(String[]::new));
            assertThat(code).as(err.toString()).isZero();
            JsonNode j = new ObjectMapper().readTree(out.toString());
            assertThat(j.get("compare_prompt_tokens").asInt()).isEqualTo(600);
            assertThat(j.has("dump")).as("run %d made its reference (the third reuses the one the second kept)", run).isEqualTo(run < 2);
            for (String k : List.of("compare_peak_rss_gb", "compare_max_heap_used_gb", "compare_heap_limit_gb", "compare_wall_s", "reference_gb"))
                assertPositive(j, k);
            var at = j.get("compare").get("sampled_peak_rss_gb");
            // /proc/self/smaps was read and split: the parts add up to the sampled total (the peak of so small a model may
            // fall before its weights are mapped or after, so their share may be anything from 0 up)
            double parts = 0;
            for (String k : List.of("checkpoint_pages", "reference_pages", "other_files", "anonymous")) {
                assertThat(at.get(k).asDouble()).as(k).isGreaterThanOrEqualTo(0);
                parts += at.get(k).asDouble();
            }
            assertThat(parts).isCloseTo(at.get("total").asDouble(), org.assertj.core.data.Offset.offset(1e-6));
            assertPositive(at, "anonymous");
            assertThat(j.get("compare_peak_rss_gb").asDouble()).as("the peak is at least any sampled resident set").isGreaterThanOrEqualTo(at.get("total").asDouble());
            // what smaps counts as the checkpoint's or the reference's pages are pages of those files: no more than they hold
            long checkpointBytes;
            try (var s = Files.list(cache)) {
                var model = s.filter(p -> !p.getFileName().toString().contains(".compare-rss-")).toList().getFirst().resolve("model.safetensors");
                checkpointBytes = Files.size(model);
            }
            // (whole 4 KB pages: a file's last page counts whole)
            assertThat(at.get("checkpoint_pages").asDouble() * 1e9).isLessThanOrEqualTo(checkpointBytes + 4096);
            assertThat(at.get("reference_pages").asDouble() * 1e9).isLessThanOrEqualTo(j.get("reference_gb").asDouble() * 1e9 + 3 * 4096);
            assertThat(j.get("compare_heap_limit_gb").asDouble()).as("the launcher's default heap, not this test JVM's").isGreaterThan(0.2);
            try (var s = Files.list(cache)) {
                var kept = s.filter(p -> p.getFileName().toString().contains(".compare-rss-600")).toList();
                assertThat(kept).as("reference dumps kept in the cache").hasSize(keep ? 1 : 0);
                if (keep) assertThat(kept.getFirst().resolve("manifest.json")).isRegularFile();
            }
        }
    }

    @Test
    void compareRssWithAnotherEngineOrAKeptReferenceAloneIsRefusedAsBadInput(@TempDir Path cache) {
        for (var args : List.of(List.of("--compare-rss", "64", "--against", "llama.cpp"), List.of("--keep-reference"), List.of("--compare-rss", "0"))) {
            var err = new StringWriter();
            var all = new java.util.ArrayList<>(List.of("bench", "--size", "small", "--cache", cache.toString()));
            all.addAll(args);
            int code = Main.commandLine(new PrintWriter(new StringWriter(), true), new PrintWriter(err, true)).execute(all.toArray(String[]::new));
            assertThat(code).as("%s: %s", args, err).isEqualTo(2);
            assertThat(err.toString()).contains("--compare-rss");
        }
        try (var s = Files.list(cache)) {
            assertThat(s.toList()).as("refused before any checkpoint is synthesized").isEmpty();
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    @Test
    void benchAgainstAnUnknownEngineIsRefusedAsBadInput(@TempDir Path cache) {
        var err = new StringWriter();
        int code = Main.commandLine(new PrintWriter(new StringWriter(), true), new PrintWriter(err, true))
                .execute("bench", "--size", "small", "--against", "vllm", "--cache", cache.toString());
        assertThat(code).isEqualTo(2);
        assertThat(err.toString()).contains("--against takes llama.cpp");
    }

    private static void assertPositive(JsonNode j, String key) {
        assertThat(j.has(key)).as("key %s in %s", key, j).isTrue();
        double v = j.get(key).asDouble();
        assertThat(Double.isFinite(v) && v > 0).as("%s = %s", key, v).isTrue();
    }
}
