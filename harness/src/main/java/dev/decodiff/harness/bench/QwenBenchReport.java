package dev.decodiff.harness.bench;

import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.decodiff.harness.report.Fmt;

import java.io.PrintWriter;

/** How {@code bench --size qwen35-…} prints its {@link QwenBench.Result}: as text, or as JSON (medians, with each figure's spread). */
final class QwenBenchReport {
    private QwenBenchReport() {}

    /** The decode target: a step's weight traffic at least this share of the best read pass. */
    static final double TARGET = 0.9;

    static void print(QwenBench.Result r, PrintWriter out) {
        double best = r.bestReadGbs();
        out.println("model    " + r.spec().describe());
        out.println("machine  " + r.machine().cpu() + ", " + r.machine().threads() + " threads, kernels: " + r.machine().kernels());
        out.println(Fmt.format("read     best pass %.1f GB/s (weights where the engine reads them: median %.1f; anonymous%s: median %.1f; between decode rounds: median %.1f)",
                best, r.weightsReadGbs().median(), r.anonymousHugePages() ? " on huge pages" : "", r.anonymousReadGbs().median(), r.roundReadGbs().median()));
        // the target is a share of the best single pass: what a typical pass of the same run reaches of it bounds what any step can
        out.println(Fmt.format("         a pass between decode rounds reaches %.2f of the best pass (median)", r.roundReadGbs().median() / best));
        for (var m : r.models()) {
            out.println(Fmt.format("%-6s   %.3f GB/token, load added %.2f GB RSS; prefill %d: %.1f tok/s", m.name(), m.bytesPerToken() / 1e9,
                    m.rssAddedBytes() / 1e9, QwenBench.PREFILL, m.prefillTokensPerS().median()));
            out.println("         weights " + m.placement());
            out.println(Fmt.format("         kernels alone (every streamed matrix's matvec in turn): %.2f of the read pass of their round",
                    m.kernelsOverRoundPass().median()));
            for (int c : QwenBench.CONTEXTS) {
                double tps = m.decodeTokensPerS().get(c).median(), gbs = m.bytesPerToken() / 1e9 * tps;
                out.println(Fmt.format("  decode @%-4d %6.2f tok/s  %5.1f GB/s = %.2f of the best read pass, %.2f of its round's, %.2f of the kernels'  recurrent step %.2f ms/token (%.0f%% of it)",
                        c, tps, gbs, gbs / best, m.overRoundPass().get(c).median(), m.decodeOverKernels().get(c).median(), m.recurrentMsPerToken().get(c).median(),
                        100 * m.recurrentShare().get(c).median()));
            }
        }
        if (r.against() != null) printAgainst(r, out);
        out.println(Fmt.format("state    the Gated DeltaNet layers' recurrent state: %.1f MB, read twice and written once per decode token (not in the weight traffic above)",
                r.spec().recurrentStateBytes() / 1e6));
        out.println(Fmt.format("peak RSS %.2f GB (the whole bench process: both models, six sessions)", r.peakRssBytes() / 1e9));
        for (var m : r.models()) {
            double gbs = m.bytesPerToken() / 1e9 * m.decodeTokensPerS().get(QwenBench.CONTEXTS[0]).median();
            out.println(Fmt.format("target   %s decode @%d ≥ %.1f of the best read pass: %s (%.2f)", m.name(), QwenBench.CONTEXTS[0], TARGET,
                    gbs / best >= TARGET ? "met" : "not met", gbs / best));
        }
    }

    /** decodiff over llama.cpp on the bf16 model, medians of per-round ratios, and llama.cpp's own figures. */
    private static void printAgainst(QwenBench.Result r, PrintWriter out) {
        var a = r.against();
        var bf16 = r.models().getFirst();
        var l = a.llamaCpp();
        out.println("against  " + a.release() + " (the bf16 model as a bf16 GGUF, f32 K/V both; " + a.decodiff().prefillTps().length
                + " rounds interleaved, decodiff first; medians of per-round ratios)");
        out.println("  build: " + a.build());
        out.println("  " + a.settings());
        for (int c : QwenBench.CONTEXTS) {
            double tps = Figure.of(l.decodeTps().get(c)).median();
            out.println(Fmt.format("  decode @%-4d decodiff/llama.cpp %.2f×   llama.cpp %6.2f tok/s = %.2f of the best read pass (flash attention %s)", c,
                    Figure.of(a.decodeRatios(c)).median(), tps, bf16.bytesPerToken() / 1e9 * tps / r.bestReadGbs(), a.flashAttentionOf(a.flashOffForDecode(c))));
        }
        out.println(Fmt.format("  prefill %d  decodiff/llama.cpp %.2f×   llama.cpp %6.1f tok/s (flash attention %s)", QwenBench.PREFILL,
                Figure.of(a.prefillRatios()).median(), Figure.of(l.prefillTps()).median(), a.flashAttentionOf(a.flashOffForPrefill())));
    }

    static ObjectNode json(QwenBench.Result r) {
        var o = JsonNodeFactory.instance.objectNode();
        double best = r.bestReadGbs();
        o.put("model", r.spec().describe());
        o.put("model_key", r.spec().key());
        o.put("parameters", r.spec().parameters());
        o.put("cpu", r.machine().cpu());
        o.put("threads", r.machine().threads());
        o.put("kernels", r.machine().kernels());
        o.put("decode_steps", r.steps());
        o.put("read_bandwidth_best_gbs", best);
        o.put("read_bandwidth_weights_gbs", r.weightsReadGbs().median());
        o.put("read_bandwidth_anonymous_gbs", r.anonymousReadGbs().median());
        o.put("read_bandwidth_anonymous_huge_pages", r.anonymousHugePages());
        o.put("read_bandwidth_during_decode_gbs", r.roundReadGbs().median());
        o.put("read_during_decode_over_best_read_pass", r.roundReadGbs().median() / best);
        o.put("peak_rss_bytes", r.peakRssBytes());
        o.put("recurrent_state_bytes", r.spec().recurrentStateBytes());
        var ms = o.putArray("models");
        var targets = o.putObject("targets");
        var figures = o.putObject("figures");
        put(figures, "read_bandwidth_weights_gbs", r.weightsReadGbs());
        put(figures, "read_bandwidth_anonymous_gbs", r.anonymousReadGbs());
        put(figures, "read_bandwidth_during_decode_gbs", r.roundReadGbs());
        for (var m : r.models()) {
            var j = ms.addObject();
            j.put("name", m.name()).put("checkpoint", m.directory()).put("weights_placement", m.placement()).put("bytes_per_token", m.bytesPerToken())
                    .put("rss_added_by_load_bytes", m.rssAddedBytes()).put("prefill_tokens_per_s", m.prefillTokensPerS().median());
            put(figures, m.name() + "_prefill_tokens_per_s", m.prefillTokensPerS());
            var tps = j.putObject("decode_tokens_per_s");
            var gbs = j.putObject("decode_weight_gbs");
            var over = j.putObject("decode_over_best_read_pass");
            var paired = j.putObject("decode_over_round_read_pass");
            var rec = j.putObject("recurrent_ms_per_token");
            var share = j.putObject("recurrent_share_of_step");
            j.put("kernels_alone_over_round_read_pass", m.kernelsOverRoundPass().median());
            put(figures, m.name() + "_kernels_alone_over_round_read_pass", m.kernelsOverRoundPass());
            var overKernels = j.putObject("decode_over_kernels_alone");
            for (int c : QwenBench.CONTEXTS) {
                String k = Integer.toString(c);
                double t = m.decodeTokensPerS().get(c).median(), g = m.bytesPerToken() / 1e9 * t;
                tps.put(k, t);
                gbs.put(k, g);
                over.put(k, g / best);
                paired.put(k, m.overRoundPass().get(c).median());
                rec.put(k, m.recurrentMsPerToken().get(c).median());
                share.put(k, m.recurrentShare().get(c).median());
                overKernels.put(k, m.decodeOverKernels().get(c).median());
                put(figures, m.name() + "_decode_" + k + "_tokens_per_s", m.decodeTokensPerS().get(c));
                put(figures, m.name() + "_recurrent_" + k + "_ms_per_token", m.recurrentMsPerToken().get(c));
            }
            targets.put(m.name() + "_decode_128_ge_0.9_of_best_read_pass", over.get("128").asDouble() >= TARGET);
        }
        if (r.against() != null) {
            var a = r.against();
            var l = a.llamaCpp();
            var j = o.putObject("against_llamacpp");
            j.put("release", a.release()).put("build", a.build()).put("cpu_backend", a.cpuBackend()).put("threads", a.threads())
                    .put("settings", a.settings()).put("kv_types", "f32").put("model", "bf16").put("rounds", a.decodiff().prefillTps().length);
            var vs = j.putObject("decode_vs_llamacpp");
            var tps = j.putObject("llamacpp_decode_tokens_per_s");
            var over = j.putObject("llamacpp_decode_over_best_read_pass");
            var flash = j.putObject("flash_attn_used");
            var perRound = j.putObject("per_round_vs_llamacpp");
            long bytes = r.models().getFirst().bytesPerToken();
            for (int c : QwenBench.CONTEXTS) {
                String k = Integer.toString(c);
                vs.put(k, Figure.of(a.decodeRatios(c)).median());
                double t = Figure.of(l.decodeTps().get(c)).median();
                tps.put(k, t);
                over.put(k, bytes / 1e9 * t / best);
                flash.put("decode_" + k, a.flashAttentionOf(a.flashOffForDecode(c)));
                var pr = perRound.putArray("decode_" + k);
                for (double x : a.decodeRatios(c)) pr.add(x);
                put(figures, "against_decodiff_decode_tokens_per_s_" + k, Figure.of(a.decodiff().decodeTps().get(c)));
                put(figures, "against_llamacpp_decode_tokens_per_s_" + k, Figure.of(l.decodeTps().get(c)));
                put(figures, "against_llamacpp_flash_auto_decode_tokens_per_s_" + k, Figure.of(a.llamaCppFlashAuto().decodeTps().get(c)));
                put(figures, "against_llamacpp_flash_off_decode_tokens_per_s_" + k, Figure.of(a.llamaCppFlashOff().decodeTps().get(c)));
            }
            put(figures, "against_decodiff_prefill_tokens_per_s", Figure.of(a.decodiff().prefillTps()));
            put(figures, "against_llamacpp_prefill_tokens_per_s", Figure.of(l.prefillTps()));
            j.put("prefill_vs_llamacpp", Figure.of(a.prefillRatios()).median());
            j.put("llamacpp_prefill_tokens_per_s", Figure.of(l.prefillTps()).median());
            flash.put("prefill_" + QwenBench.PREFILL, a.flashAttentionOf(a.flashOffForPrefill()));
            var pr = perRound.putArray("prefill_" + QwenBench.PREFILL);
            for (double x : a.prefillRatios()) pr.add(x);
        }
        return o;
    }

    private static void put(ObjectNode figures, String name, Figure f) {
        figures.putObject(name).put("median", f.median()).put("min", f.min()).put("max", f.max()).put("samples", f.samples());
    }
}
