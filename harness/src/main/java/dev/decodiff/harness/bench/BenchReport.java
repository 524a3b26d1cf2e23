package dev.decodiff.harness.bench;

import dev.decodiff.harness.report.Fmt;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.decodiff.engine.KvType;
import dev.decodiff.llamacpp.ffi.LlamaContext;

import java.io.PrintWriter;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Everything one bench run measured, with the ratios and targets derived from it, as text or JSON. Under
 * {@code --core} capture, prefix reuse, the KV types, compare and the one-shot run are not measured (null) and their figures are left out;
 * without {@code --against llama.cpp} so is the comparison with llama.cpp.
 */
record BenchReport(BenchSpec spec, Machine machine, long weightBytesPerToken, ReadBandwidth read, Compute compute, Figure prefillTps, Decode decode,
                   CaptureOverhead capture, PrefixReuse prefix, KvTypes kv, CompareThroughput compare, long peakRss, Figure prefillBf16MatmulTps,
                   AgainstLlamaCpp vsLlamaCpp, OneShot oneShot, Figure prefillFmaTps, Figure prefillAmxOverFma) {

    int newTokens() { return BenchSetup.CONTEXTS[BenchSetup.CONTEXTS.length - 1] - BenchSetup.PREFIX; }

    /** The typical pass of the prefetching reader over the streamed weights (the median). */
    Figure readGbs() { return read.file(); }

    Figure decodeTps(int context) { return decode.tokensPerS().get(context); }

    double prefixSpeedup() { return decode.ttftColdS().median() / prefix.prefixReusedS().median(); }

    double turnSpeedup() { return decode.ttftColdS().median() / prefix.secondTurnS().median(); }


    double decodeWeightGbs() { return decodeWeightGbs(512); }

    double decodeWeightGbs(int context) { return weightBytesPerToken * decodeTps(context).median() / 1e9; }

    /** Decode's weight traffic at 512 over the best read pass (the ceiling, not a typical pass). */
    double bandwidthRatio() { return decodeWeightGbs() / ceilingGbs(); }

    double bandwidthRatio128() { return decodeWeightGbs(128) / ceilingGbs(); }

    /** The read ceiling: the best pass of any reader, before decode or between its rounds. */
    double ceilingGbs() { return decode.readGbs() == null ? read.bestGbs() : Math.max(read.bestGbs(), decode.readGbs().max()); }

    double ratio2048over128() { return decodeTps(128).median() / decodeTps(2048).median(); }

    double prefillOverDecode() { return prefillTps.median() / decodeTps(512).median(); }

    double compareRatio() { return compare.warmGbs().median() / readGbs().median(); }

    ObjectNode json() {
        var o = new ObjectMapper().createObjectNode();
        o.put("model", spec.key());
        o.put("parameters", spec.parameters());
        o.put("weight_bytes_per_token", weightBytesPerToken);
        o.put("threads", machine.threads());
        o.put("kernels", machine.kernels());
        o.put("read_bandwidth_gbs", readGbs().median());
        o.put("read_bandwidth_best_gbs", ceilingGbs());
        if (decode.readGbs() != null) o.put("read_bandwidth_during_decode_best_gbs", decode.readGbs().max());
        o.put("read_bandwidth_weights_best_gbs", read.weightsBestGbs());
        o.put("weights_placement", read.placement());
        if (read.mappedGbs() != null) {
            o.put("read_bandwidth_mapped_file_gbs", read.mappedGbs().median());
            o.put("read_bandwidth_mapped_file_best_gbs", read.mappedGbs().max());
        }
        o.put("read_bandwidth_anonymous_huge_pages", read.anonymousHugePages());
        o.put("read_bandwidth_java_gbs", read.javaGbs().median());
        if (read.nativeGbs() != null) o.put("read_bandwidth_native_gbs", read.nativeGbs().median());
        o.put("read_bandwidth_anonymous_gbs", read.anonymousGbs().median());
        o.put("read_bandwidth_anonymous_best_gbs", read.anonymousGbs().max());
        o.put("fma_peak_gflops", compute.fmaPeakGflops().max());
        o.put("gemm_gflops", compute.gemmGflops().max());
        o.put("gemm_shape", compute.gemmShape());
        o.put("gemm_over_fma_peak", compute.gemmOverPeak());
        if (compute.amxPeakGflops() != null) {
            o.put("amx_bf16_peak_gflops", compute.amxPeakGflops().max());
            o.put("amx_exact_gemm_gflops", compute.amxGemmGflops().median());
            o.put("amx_bf16_gemm_gflops", compute.amxBf16GemmGflops().median());
            o.put("amx_exact_gemm_over_fma_gemm", compute.amxOverFmaGemm());
            o.put("amx_bf16_gemm_over_fma_gemm", compute.amxBf16OverFmaGemm());
            o.put("amx_exact_gemm_tile_products_over_amx_peak", compute.amxTileUse());
        }
        var d = o.putObject("decode_tokens_per_s");
        decode.tokensPerS().forEach((c, f) -> d.put(Integer.toString(c), f.median()));
        o.put("decode_weight_gbs", decodeWeightGbs());
        o.put("decode_bandwidth_ratio", bandwidthRatio());
        o.put("decode_128_bandwidth_ratio", bandwidthRatio128());
        if (decode.overRoundPass() != null)
            for (var e : decode.overRoundPass().entrySet()) o.put("decode_" + e.getKey() + "_over_round_read_pass", e.getValue().median());
        o.put("decode_2048_over_128", ratio2048over128());
        o.put("prefill_tokens_per_s", prefillTps.median());
        if (prefillFmaTps != null) {
            o.put("prefill_fma_tokens_per_s", prefillFmaTps.median());
            o.put("prefill_amx_over_fma", prefillAmxOverFma.median());
        }
        o.put("prefill_over_decode", prefillOverDecode());
        if (prefillBf16MatmulTps != null) {
            o.put("prefill_bf16_matmul_tokens_per_s", prefillBf16MatmulTps.median());
            o.put("prefill_bf16_matmul_over_fp32", prefillBf16MatmulTps.median() / prefillTps.median());
        }
        o.put("peak_rss_bytes", peakRss);
        o.put("ttft_cold_s", decode.ttftColdS().median());
        if (capture != null) {
            o.put("idle_probe_overhead", capture.idleOverhead());
            o.put("dump_overhead", capture.dumpOverhead());
        }
        if (compare != null) {
            o.put("compare_gbs", compare.warmGbs().median());
            o.put("compare_bandwidth_ratio", compareRatio());
            o.put("compare_first_run_gbs", compare.firstGbs().median());
        }
        if (prefix != null) {
            o.put("prefix_tokens", BenchSetup.PREFIX);
            o.put("new_tokens", newTokens());
            o.put("ttft_prefix_reuse_s", prefix.prefixReusedS().median());
            o.put("prefix_reuse_speedup", prefixSpeedup());
            o.put("ttft_second_turn_s", prefix.secondTurnS().median());
            o.put("second_turn_speedup", turnSpeedup());
        }
        if (kv != null) {
            var kb = o.putObject("kv_bytes_per_token");
            kv.bytesPerToken().forEach((t, b) -> kb.put(t.id(), b));
            var kp = o.putObject("kv_prefill_tokens_per_s");
            var kr = o.putObject("kv_prefill_over_f32");
            double f32 = kv.prefillTps().get(KvType.F32).median();
            kv.prefillTps().forEach((t, x) -> {
                kp.put(t.id(), x.median());
                kr.put(t.id(), x.median() / f32);
            });
            var ko = o.putObject("kv_decode_over_f32");
            kv.decodeTps().forEach((c, byType) -> {
                var kd = o.putObject("kv_decode_" + c + "_tokens_per_s");
                byType.forEach((t, x) -> kd.put(t.id(), x.median()));
                var r = ko.putObject(Integer.toString(c));
                kv.decodeOverF32().get(c).forEach((t, x) -> r.put(t.id(), x.median()));
            });
        }
        var f = o.putObject("figures");
        put(f, "read_bandwidth_gbs", readGbs());
        put(f, "read_bandwidth_java_gbs", read.javaGbs());
        if (read.nativeGbs() != null) put(f, "read_bandwidth_native_gbs", read.nativeGbs());
        put(f, "read_bandwidth_anonymous_gbs", read.anonymousGbs());
        if (decode.readGbs() != null) put(f, "read_bandwidth_during_decode_gbs", decode.readGbs());
        if (read.mappedGbs() != null) put(f, "read_bandwidth_mapped_file_gbs", read.mappedGbs());
        put(f, "fma_peak_gflops", compute.fmaPeakGflops());
        put(f, "gemm_gflops", compute.gemmGflops());
        if (compute.amxPeakGflops() != null) {
            put(f, "amx_exact_gemm_over_fma_gemm_per_pass", compute.amxOverFmaPerPass());
            put(f, "amx_bf16_gemm_over_fma_gemm_per_pass", compute.amxBf16OverFmaPerPass());
            put(f, "amx_bf16_peak_gflops", compute.amxPeakGflops());
            put(f, "amx_exact_gemm_gflops", compute.amxGemmGflops());
            put(f, "amx_bf16_gemm_gflops", compute.amxBf16GemmGflops());
        }
        decode.tokensPerS().forEach((c, x) -> put(f, "decode_tokens_per_s_" + c, x));
        put(f, "prefill_tokens_per_s", prefillTps);
        if (prefillFmaTps != null) {
            put(f, "prefill_fma_tokens_per_s", prefillFmaTps);
            put(f, "prefill_amx_over_fma_per_round", prefillAmxOverFma);
        }
        if (prefillBf16MatmulTps != null) put(f, "prefill_bf16_matmul_tokens_per_s", prefillBf16MatmulTps);
        put(f, "ttft_cold_s", decode.ttftColdS());
        if (capture != null) {
            put(f, "decode_ms_no_probe", capture.noProbeMs());
            put(f, "decode_ms_idle_probe", capture.idleProbeMs());
            put(f, "decode_ms_dump", capture.dumpMs());
        }
        if (compare != null) {
            put(f, "compare_gbs", compare.warmGbs());
            put(f, "compare_first_run_gbs", compare.firstGbs());
        }
        if (prefix != null) {
            put(f, "ttft_prefix_reuse_s", prefix.prefixReusedS());
            put(f, "ttft_second_turn_s", prefix.secondTurnS());
        }
        if (kv != null) {
            kv.prefillTps().forEach((t, x) -> put(f, "kv_prefill_tokens_per_s_" + t.id(), x));
            kv.decodeTps().forEach((c, byType) -> byType.forEach((t, x) -> put(f, "kv_decode_" + c + "_tokens_per_s_" + t.id(), x)));
            kv.decodeOverF32().forEach((c, byType) -> byType.forEach((t, x) -> put(f, "kv_decode_" + c + "_over_f32_" + t.id(), x)));
        }
        if (vsLlamaCpp != null) {
            o.put("llamacpp_release", vsLlamaCpp.release());
            o.put("llamacpp_cpu_backend", vsLlamaCpp.cpuBackend());
            o.put("llamacpp_build", vsLlamaCpp.build());
            if (vsLlamaCpp.hasLlamaBench()) {
                var lb = o.putObject("runner_vs_llama_bench_f16_kv");
                lb.put("decode_" + BenchSetup.PREFILL, Figure.of(vsLlamaCpp.runnerOverLlamaBenchDecode()).median());
                lb.put("prefill_" + BenchSetup.PREFILL, Figure.of(vsLlamaCpp.runnerOverLlamaBenchPrefill()).median());
                put(f, "llama_bench_f16_kv_decode_tokens_per_s_" + BenchSetup.PREFILL, Figure.of(vsLlamaCpp.llamaBench().decodeTps().get(BenchSetup.PREFILL)));
                put(f, "llama_bench_f16_kv_prefill_tokens_per_s", Figure.of(vsLlamaCpp.llamaBench().prefillTps()));
            }
            var ls = o.putObject("llamacpp_settings");
            ls.put("n_batch", LlamaContext.Scheduling.BENCH_BATCH);
            ls.put("n_ubatch", LlamaContext.Scheduling.BENCH_UBATCH);
            ls.put("flash_attn", "auto, and off");
            ls.put("flash_attn_auto_resolved", vsLlamaCpp.flashAttentionAuto() ? "on" : "off");
            var fu = ls.putObject("flash_attn_used");
            for (int c : BenchSetup.CONTEXTS) fu.put("decode_" + c, vsLlamaCpp.flashAttentionOf(vsLlamaCpp.flashOffForDecode(c)));
            fu.put("prefill_" + BenchSetup.PREFILL, vsLlamaCpp.flashAttentionOf(vsLlamaCpp.flashOffForPrefill()));
            ls.put("threadpool_poll", LlamaContext.Scheduling.BENCH_POLL);
            ls.put("threads", vsLlamaCpp.threads());
            ls.put("outputs", "last token");
            ls.put("warm_up", true);
            var dv = o.putObject("decode_vs_llamacpp");
            var pr = o.putObject("per_round_vs_llamacpp");
            for (int c : BenchSetup.CONTEXTS) {
                dv.put(Integer.toString(c), Figure.of(vsLlamaCpp.decodeRatios(c)).median());
                putRounds(pr, "decode_" + c, vsLlamaCpp.decodeRatios(c));
                put(f, "against_decodiff_decode_tokens_per_s_" + c, Figure.of(vsLlamaCpp.decodiff().decodeTps().get(c)));
                put(f, "against_llamacpp_decode_tokens_per_s_" + c, Figure.of(vsLlamaCpp.llamaCpp().decodeTps().get(c)));
                put(f, "against_llamacpp_flash_auto_decode_tokens_per_s_" + c, Figure.of(vsLlamaCpp.llamaCppFlashAuto().decodeTps().get(c)));
                put(f, "against_llamacpp_flash_off_decode_tokens_per_s_" + c, Figure.of(vsLlamaCpp.llamaCppFlashOff().decodeTps().get(c)));
            }
            o.put("prefill_vs_llamacpp", Figure.of(vsLlamaCpp.prefillRatios()).median());
            putRounds(pr, "prefill_" + BenchSetup.PREFILL, vsLlamaCpp.prefillRatios());
            put(f, "against_decodiff_prefill_tokens_per_s", Figure.of(vsLlamaCpp.decodiff().prefillTps()));
            put(f, "against_llamacpp_prefill_tokens_per_s", Figure.of(vsLlamaCpp.llamaCpp().prefillTps()));
            put(f, "against_llamacpp_flash_auto_prefill_tokens_per_s", Figure.of(vsLlamaCpp.llamaCppFlashAuto().prefillTps()));
            put(f, "against_llamacpp_flash_off_prefill_tokens_per_s", Figure.of(vsLlamaCpp.llamaCppFlashOff().prefillTps()));
            o.put("prefill_bf16_matmul_vs_llamacpp", Figure.of(vsLlamaCpp.bf16MatmulPrefillRatios()).median());
            putRounds(pr, "prefill_bf16_matmul_" + BenchSetup.PREFILL, vsLlamaCpp.bf16MatmulPrefillRatios());
            put(f, "against_decodiff_bf16_matmul_prefill_tokens_per_s", Figure.of(vsLlamaCpp.decodiffBf16MatmulPrefillTps()));
            var h = o.putObject("bf16_kv_vs_llamacpp_f16_kv");
            h.put("decode_" + BenchSetup.PREFILL, Figure.of(vsLlamaCpp.halfKvDecodeRatios()).median());
            h.put("prefill_" + BenchSetup.PREFILL, Figure.of(vsLlamaCpp.halfKvPrefillRatios()).median());
            putRounds(pr, "bf16_kv_vs_f16_kv_decode_" + BenchSetup.PREFILL, vsLlamaCpp.halfKvDecodeRatios());
            putRounds(pr, "bf16_kv_vs_f16_kv_prefill_" + BenchSetup.PREFILL, vsLlamaCpp.halfKvPrefillRatios());
        }
        if (oneShot != null) {
            oneShot.figures().forEach((k, x) -> {
                o.put(k, x.median());
                put(f, k, x);
            });
            o.put("one_shot_startup_cache", oneShot.aotCache());
        }
        var t = o.putObject("targets");
        targets().forEach(t::put);
        return o;
    }

    private static void putRounds(ObjectNode o, String k, double[] v) {
        var a = o.putArray(k);
        for (double x : v) a.add(x);
    }

    private static void put(ObjectNode o, String k, Figure f) {
        o.putObject(k).put("min", f.min()).put("median", f.median()).put("max", f.max()).put("samples", f.samples());
    }

    Map<String, Boolean> targets() {
        var t = new LinkedHashMap<String, Boolean>();
        t.put("decode_weight_traffic_ge_0.85_read_bandwidth", bandwidthRatio() >= 0.85);
        t.put("decode_128_weight_traffic_ge_0.8_best_read_bandwidth", bandwidthRatio128() >= 0.8);
        t.put("gemm_ge_0.8_fma_peak", compute.gemmOverPeak() >= 0.8);
        if (compute.amxPeakGflops() != null) {
            t.put("amx_exact_gemm_ge_2_fma_gemm", compute.amxOverFmaGemm() >= 2);
            t.put("amx_bf16_gemm_ge_4_fma_gemm", compute.amxBf16OverFmaGemm() >= 4);
        }
        t.put("decode_2048_le_1.25_decode_128", ratio2048over128() <= 1.25);
        t.put("prefill_ge_6_decode", prefillOverDecode() >= 6);
        if (capture != null) t.put("idle_probe_le_1.02", capture.idleOverhead() <= 1.02);
        if (compare != null) t.put("compare_ge_0.5_read_bandwidth", compareRatio() >= 0.5);
        if (prefix != null) t.put("prefix_reuse_ttft_ge_10x", prefixSpeedup() >= 10);
        if (kv != null) {
            t.put("no_kv_prefill_cliff", kv.worstPrefillRatio() >= 0.5);
            t.put("quantized_kv_decode_2048_ge_f32", kv.worstQuantizedDecodeRatio() >= 1.0);
        }
        if (oneShot != null) t.put("one_shot_prefill_le_1.3_warm", oneShot.prefillTimeOverWarm().median() <= 1.3);
        return t;
    }

    void print(PrintWriter out) {
        out.println("decodiff bench — " + spec.describe());
        out.println("machine: " + machine.cpu() + ", " + machine.threads() + Fmt.format(" threads; weights read per decode token: %.3f GB", weightBytesPerToken / 1e9));
        out.println("kernels: " + machine.kernels());
        out.println("median (min, max, samples):");
        out.println("weights: " + read.placement());
        out.println("  read bandwidth          " + readGbs().format("%7.2f") + Fmt.format(" GB/s  (streamed weights where the engine reads them, %s reader, equal shares; Java reader %.2f)", read.nativeGbs() == null ? "Java" : "prefetching", read.javaGbs().median()));
        if (read.mappedGbs() != null)
            out.println("  … same, mapped file     " + read.mappedGbs().format("%7.2f") + " GB/s  (the checkpoint's file mapping, 4 KB pages)");
        out.println("  anonymous memory read   " + read.anonymousGbs().format("%7.2f") + Fmt.format(" GB/s  (%d MiB, no page cache%s)", read.anonymousBytes() >> 20, read.anonymousHugePages() ? ", huge pages" : ""));
        if (decode.readGbs() != null)
            out.println("  … between decode rounds " + decode.readGbs().format("%7.2f") + " GB/s  (the first reader, one pass after each round of decode steps)");
        out.println(Fmt.format("  read ceiling            %7.2f GB/s  (best pass of any reader above: what decode is measured against)", ceilingGbs()));
        out.println("  fp32 FMA peak           " + compute.fmaPeakGflops().format("%7.1f") + " GFLOPS (in-register FMA loop, all threads)");
        if (compute.amxPeakGflops() != null)
            out.println("  AMX bf16 peak           " + compute.amxPeakGflops().format("%7.1f") + " GFLOPS (in-register tile loop, all threads)");
        out.println("  prefill GEMM, FMA       " + compute.gemmGflops().format("%7.1f") + Fmt.format(" GFLOPS (%s, exact fp32 on fused multiply-adds)", compute.gemmShape()));
        if (compute.amxPeakGflops() != null) {
            out.println("  prefill GEMM, AMX       " + compute.amxGemmGflops().format("%7.1f")
                    + Fmt.format(" GFLOPS (exact: activations split into 3 bf16 terms; %.2f × the FMA GEMM, tile products %.2f of the AMX peak)",
                    compute.amxOverFmaGemm(), compute.amxTileUse()));
            out.println("  … with --matmul bf16    " + compute.amxBf16GemmGflops().format("%7.1f")
                    + Fmt.format(" GFLOPS (AMX tiles, activations rounded to bf16; %.2f × the exact FMA GEMM)", compute.amxBf16OverFmaGemm()));
        }
        for (int c : BenchSetup.CONTEXTS) out.println(Fmt.format("  decode @ctx %-5d       ", c) + decodeTps(c).format("%7.2f") + " tok/s");
        out.println(Fmt.format("  decode weight traffic   %7.2f GB/s at ctx 512", decodeWeightGbs()));
        out.println(Fmt.format("  prefill %d tokens      ", BenchSetup.PREFILL) + prefillTps.format("%7.1f") + " tok/s"
                + (prefillFmaTps == null ? "" : "  (exact, GEMMs on AMX tiles)"));
        if (prefillFmaTps != null)
            out.println("  … on the FMA kernels    " + prefillFmaTps.format("%7.1f")
                    + Fmt.format(" tok/s  (--matmul fp32-fma, the same rounds; AMX prefill %.2f × this, median of the rounds)", prefillAmxOverFma.median()));
        if (prefillBf16MatmulTps != null)
            out.println("  … with --matmul bf16    " + prefillBf16MatmulTps.format("%7.1f") + Fmt.format(" tok/s  (%.2f × exact fp32; not exact, docs/matmul-bf16.md)", prefillBf16MatmulTps.median() / prefillTps.median()));
        if (capture != null) {
            out.println("  decode step, no probe   " + capture.noProbeMs().format("%7.1f") + " ms");
            out.println("  decode step, idle probe " + capture.idleProbeMs().format("%7.1f") + " ms");
            out.println("  decode step, dump       " + capture.dumpMs().format("%7.1f") + Fmt.format(" ms  (%.1f MB per step written)", capture.dumpBytesPerStep() / 1e6));
        }
        if (compare != null)
            out.println("  compare                 " + compare.warmGbs().format("%7.2f") + Fmt.format(" GB/s of tensor data (warm; first, cold run: %.2f)", compare.firstGbs().median()));
        out.println(Fmt.format("  peak RSS                %7.2f GB", peakRss / 1e9));
        out.println(Fmt.format("  TTFT, %d tokens cold    ", BenchSetup.PREFIX + newTokens()) + decode.ttftColdS().format("%7.2f") + " s");
        if (prefix != null) {
            out.println(Fmt.format("  TTFT, %d-token prefix reused + %d new ", BenchSetup.PREFIX, newTokens()) + prefix.prefixReusedS().format("%7.3f") + " s");
            out.println(Fmt.format("  TTFT, second turn of %d new tokens    ", newTokens()) + prefix.secondTurnS().format("%7.3f") + " s");
        }
        if (kv != null) {
            out.println(Fmt.format("  KV cache type (the types in turn)  bytes/token   prefill %d tok/s (× f32)   decode @512 tok/s (× f32)   decode @2048 tok/s (× f32)",
                    BenchSetup.PREFILL));
            double f32 = kv.prefillTps().get(KvType.F32).median();
            for (var t : KvType.values()) {
                var d = kv.decodeTps();
                var o = kv.decodeOverF32();
                out.println(Fmt.format("    %-5s                           %10d   %8.1f (%4.2f)              %6.2f (%4.2f)            %6.2f (%4.2f)", t.id(),
                        kv.bytesPerToken().get(t), kv.prefillTps().get(t).median(), kv.prefillTps().get(t).median() / f32,
                        d.get(512).get(t).median(), o.get(512).get(t).median(), d.get(2048).get(t).median(), o.get(2048).get(t).median()));
            }
        }
        if (oneShot != null) {
            out.println(Fmt.format("  one-shot prefill %d    ", BenchSetup.PREFILL) + oneShot.prefillTps().format("%7.1f")
                    + Fmt.format(" tok/s  (a fresh JVM, %s; warm in the same rounds %.1f)", oneShot.aotCache() ? "startup cache" : "no startup cache",
                    oneShot.warmPrefillTps().median()));
            out.println("  one-shot wall time      " + oneShot.wallS().format("%7.2f")
                    + Fmt.format(" s  (JVM start to exit; %.2f s of it neither prefill nor decode)", oneShot.outsideS().median()));
        }
        if (vsLlamaCpp != null) printVsLlamaCpp(out);
        out.println("ratios (targets):");
        out.println(Fmt.format("  decode weight traffic / best read       %5.2f  (≥ 0.85) %s", bandwidthRatio(), ok(bandwidthRatio() >= 0.85)));
        out.println(Fmt.format("  the same at ctx 128                     %5.2f  (≥ 0.8)  %s", bandwidthRatio128(), ok(bandwidthRatio128() >= 0.8)));
        if (decode.overRoundPass() != null)
            out.println("  … over the read pass of its own round   " + decode.overRoundPass().get(128).format("%5.2f") + "  (ctx 128; each step against the pass right after it)");
        out.println(Fmt.format("  prefill GEMM / FMA peak (best passes)   %5.2f  (≥ 0.8)  %s", compute.gemmOverPeak(), ok(compute.gemmOverPeak() >= 0.8)));
        if (compute.amxPeakGflops() != null) {
            out.println(Fmt.format("  exact GEMM, AMX / FMA                   %5.2f  (≥ 2)    %s", compute.amxOverFmaGemm(), ok(compute.amxOverFmaGemm() >= 2)));
            out.println(Fmt.format("  bf16 GEMM, AMX / exact FMA GEMM         %5.2f  (≥ 4)    %s", compute.amxBf16OverFmaGemm(), ok(compute.amxBf16OverFmaGemm() >= 4)));
        }
        out.println(Fmt.format("  decode time @2048 / @128                %5.2f  (≤ 1.25) %s", ratio2048over128(), ok(ratio2048over128() <= 1.25)));
        out.println(Fmt.format("  prefill tok/s / decode tok/s            %5.2f  (≥ 6)    %s", prefillOverDecode(), ok(prefillOverDecode() >= 6)));
        if (capture != null) {
            out.println(Fmt.format("  idle probe / no probe                   %5.3f  (≤ 1.02) %s", capture.idleOverhead(), ok(capture.idleOverhead() <= 1.02)));
            out.println(Fmt.format("  dump / no probe                         %5.2f", capture.dumpOverhead()));
        }
        if (compare != null)
            out.println(Fmt.format("  compare / read bandwidth                %5.2f  (≥ 0.5)  %s", compareRatio(), ok(compareRatio() >= 0.5)));
        if (oneShot != null)
            out.println(Fmt.format("  one-shot prefill time / warm            %5.2f  (≤ 1.3)  %s", oneShot.prefillTimeOverWarm().median(),
                    ok(oneShot.prefillTimeOverWarm().median() <= 1.3)));
        if (prefix == null || kv == null) return;
        out.println("ratios (prefix reuse):");
        out.println(Fmt.format("  TTFT cold / prefix reused               %5.1f  (≥ 10)   %s", prefixSpeedup(), ok(prefixSpeedup() >= 10)));
        out.println(Fmt.format("  TTFT re-read conversation / second turn %5.1f", turnSpeedup()));
        out.println(Fmt.format("  slowest quantized-KV prefill / f32      %5.2f  (no cliff: ≥ 0.5) %s", kv.worstPrefillRatio(), ok(kv.worstPrefillRatio() >= 0.5)));
        out.println(Fmt.format("  slower of q8_0/q4_0 decode @2048 / f32  %5.2f  (≥ 1)    %s", kv.worstQuantizedDecodeRatio(), ok(kv.worstQuantizedDecodeRatio() >= 1.0)));
    }

    private void printVsLlamaCpp(PrintWriter out) {
        out.println("against " + vsLlamaCpp.release() + " (bf16 GGUF, f32 K/V; rounds interleaved, decodiff first)");
        out.println("  build: " + vsLlamaCpp.build());
        out.println("  " + vsLlamaCpp.settings());
        out.println("  figure (tok/s)     decodiff   llama.cpp   decodiff/llama.cpp median   per round   (llama.cpp's flash attention)");
        var best = vsLlamaCpp.llamaCpp();
        for (int c : BenchSetup.CONTEXTS)
            printVs(out, Fmt.format("decode @ctx %-5d", c), vsLlamaCpp.decodiff().decodeTps().get(c), best.decodeTps().get(c),
                    vsLlamaCpp.flashAttentionOf(vsLlamaCpp.flashOffForDecode(c)));
        String prefillFlash = vsLlamaCpp.flashAttentionOf(vsLlamaCpp.flashOffForPrefill());
        printVs(out, Fmt.format("prefill %d     ", BenchSetup.PREFILL), vsLlamaCpp.decodiff().prefillTps(), best.prefillTps(), prefillFlash);
        printVs(out, "… --matmul bf16 ", vsLlamaCpp.decodiffBf16MatmulPrefillTps(), best.prefillTps(), prefillFlash);
        out.println("  decodiff bf16 K/V against llama.cpp f16 K/V (its default):");
        printVs(out, Fmt.format("decode @ctx %-5d", BenchSetup.PREFILL), vsLlamaCpp.decodiffBf16Kv().decodeTps().get(BenchSetup.PREFILL),
                vsLlamaCpp.llamaCppF16Kv().decodeTps().get(BenchSetup.PREFILL), vsLlamaCpp.flashAttentionOf(false));
        printVs(out, Fmt.format("prefill %d     ", BenchSetup.PREFILL), vsLlamaCpp.decodiffBf16Kv().prefillTps(), vsLlamaCpp.llamaCppF16Kv().prefillTps(),
                vsLlamaCpp.flashAttentionOf(false));
        if (vsLlamaCpp.hasLlamaBench()) {
            out.println("  llama.cpp's own llama-bench from the same build, at the settings of the f16 K/V run above (its default cache; it has no f32 one):");
            out.println("  figure (tok/s)     runner    llama-bench  runner/llama-bench median  per round   (flash attention)");
            printVs(out, Fmt.format("decode @ctx %-5d", BenchSetup.PREFILL), vsLlamaCpp.llamaCppF16Kv().decodeTps().get(BenchSetup.PREFILL),
                    vsLlamaCpp.llamaBench().decodeTps().get(BenchSetup.PREFILL), vsLlamaCpp.flashAttentionOf(false));
            printVs(out, Fmt.format("prefill %d     ", BenchSetup.PREFILL), vsLlamaCpp.llamaCppF16Kv().prefillTps(), vsLlamaCpp.llamaBench().prefillTps(), vsLlamaCpp.flashAttentionOf(false));
        } else {
            out.println("  (no llama-bench beside these libraries; scripts/llamacpp-native.sh builds one with them)");
        }
    }

    private static void printVs(PrintWriter out, String label, double[] ours, double[] theirs, String flash) {
        var rounds = new StringBuilder();
        for (double r : AgainstLlamaCpp.ratios(ours, theirs)) rounds.append(Fmt.format(" %.2f", r));
        out.println(Fmt.format("  %s  %8.2f    %8.2f    %8.2f                 %-11s (%s)", label, Figure.of(ours).median(), Figure.of(theirs).median(),
                Figure.of(AgainstLlamaCpp.ratios(ours, theirs)).median(), rounds.toString().strip(), flash));
    }

    private static String ok(boolean b) { return b ? "holds" : "MISSED"; }
}
