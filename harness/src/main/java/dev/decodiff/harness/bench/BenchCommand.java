package dev.decodiff.harness.bench;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.InferenceSession;
import dev.decodiff.engine.KvType;
import dev.decodiff.engine.PrefixCache;
import dev.decodiff.engine.Probe;
import dev.decodiff.engine.Sampler;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.compare.Comparison;
import dev.decodiff.harness.dump.DumpManifest;
import dev.decodiff.harness.dump.DumpWriter;
import dev.decodiff.harness.live.CapturingProbe;
import dev.decodiff.harness.live.LiveStep;
import dev.decodiff.metal.NativeKernels;
import dev.decodiff.metal.Parallel;
import dev.decodiff.metal.StreamRead;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.Callable;

/**
 * {@code decodiff bench}: synthesizes (once, cached) a random Gemma 4 checkpoint of realistic geometry and measures,
 * in one run, the machine's read bandwidth and the engine's decode, prefill, capture and compare speed, as ratios
 * (issue 5). Every figure is the median of several samples, with min and max.
 */
@Command(name = "bench", mixinStandardHelpOptions = true,
        description = {"Measures decode/prefill speed against the machine's memory bandwidth, probe and dump overhead, and compare throughput,",
                "on a random Gemma 4 checkpoint synthesized once and cached (default: a 1.06 B-parameter model, 2.1 GB in bf16)."},
        footer = {"", "Examples:", "  decodiff bench", "  decodiff bench --size small --json", "  decodiff bench --size default,layers=6"})
public final class BenchCommand implements Callable<Integer> {
    @Option(names = "--size", paramLabel = "SPEC", defaultValue = "default",
            description = "Preset (default = 1.06 B params/2.1 GB, small ≈ 100 MB) with optional overrides, e.g. 'default,layers=12' "
                    + "(keys: hidden, layers, heads, kv, head_dim, global_head_dim, ffn, vocab, window, seed).")
    String size;

    @Option(names = "--json", description = "Print the figures as JSON on stdout (progress still goes to stderr).")
    boolean json;

    @Option(names = "--cache", paramLabel = "DIR", description = "Where synthesized checkpoints are kept (default ~/.cache/decodiff/bench).")
    Path cache;

    @Option(names = "--decode-steps", paramLabel = "N", defaultValue = "8", description = "Timed decode steps per context (default 8).")
    int decodeSteps;

    @Option(names = "--repeats", paramLabel = "N", defaultValue = "3", description = "Repeats of prefill, compare and bandwidth runs (default 3; bandwidth runs 2N+1, compare max(N, 5) after a 3 s warm-up).")
    int repeats;

    @picocli.CommandLine.Spec
    picocli.CommandLine.Model.CommandSpec spec;

    static final int[] CONTEXTS = {128, 512, 2048};
    static final int PREFILL = 512;
    /** The shared prefix of issue 6 point 4 (a stored snapshot), and the new tokens a request or turn adds to it. */
    static final int PREFIX = 2000;

    @Override
    public Integer call() throws IOException {
        if (decodeSteps < 2 || repeats < 1) throw new BadInputException("--decode-steps must be ≥ 2 and --repeats ≥ 1");
        BenchSpec bs = BenchSpec.parse(size);
        PrintWriter err = spec.commandLine().getErr();
        long began = System.nanoTime();
        java.util.function.Consumer<String> log = s -> {
            err.printf("bench [%5.1f s] %s%n", (System.nanoTime() - began) / 1e9, s);
            err.flush();
        };
        Path dir = BenchCheckpoint.ensure(bs, cache != null ? cache : BenchCheckpoint.defaultCacheRoot(), log);
        Path work = Files.createTempDirectory("decodiff-bench-");
        try (var model = Gemma4Model.load(dir)) {
            var r = run(bs, dir, model, work, log);
            if (json) {
                spec.commandLine().getOut().println(new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT).writeValueAsString(r.json()));
            } else {
                r.print(spec.commandLine().getOut());
            }
            spec.commandLine().getOut().flush();
        } finally {
            deleteTree(work);
        }
        return 0;
    }

    /** Everything measured in one run. */
    record Result(BenchSpec spec, String machine, int threads, String kernels, long weightBytesPerToken, Figure readGbs, Figure readJavaGbs,
                  Figure readNativeGbs, Map<Integer, Figure> decodeTps,
                  Figure prefillTps, Figure noProbeMs, Figure idleProbeMs, Figure dumpMs, long dumpBytes, Figure compareGbs, Figure compareFirstGbs,
                  long peakRss, Figure ttftColdS, Figure ttftPrefixS, Figure ttftTurnS, Map<KvType, Long> kvBytes,
                  Map<KvType, Figure> kvPrefillTps, Map<KvType, Figure> kvDecodeTps) {

        int suffix() { return CONTEXTS[CONTEXTS.length - 1] - PREFIX; }

        double prefixSpeedup() { return ttftColdS.median() / ttftPrefixS.median(); }

        double turnSpeedup() { return ttftColdS.median() / ttftTurnS.median(); }

        Figure kvPrefill(KvType t) { return t == KvType.F32 ? prefillTps : kvPrefillTps.get(t); }

        Figure kvDecode(KvType t) { return t == KvType.F32 ? decodeTps.get(512) : kvDecodeTps.get(t); }

        /** The slowest quantized prefill relative to f32 (a cliff shows here). */
        double worstKvPrefillRatio() {
            double w = Double.POSITIVE_INFINITY;
            for (var f : kvPrefillTps.values()) w = Math.min(w, f.median() / prefillTps.median());
            return w;
        }

        double decodeWeightGbs() { return weightBytesPerToken * decodeTps.get(512).median() / 1e9; }

        double bandwidthRatio() { return decodeWeightGbs() / readGbs.median(); }

        double ratio2048over128() { return decodeTps.get(128).median() / decodeTps.get(2048).median(); }

        double prefillOverDecode() { return prefillTps.median() / decodeTps.get(512).median(); }

        double idleOverhead() { return idleProbeMs.median() / noProbeMs.median(); }

        double dumpOverhead() { return dumpMs.median() / noProbeMs.median(); }

        double compareRatio() { return compareGbs.median() / readGbs.median(); }

        ObjectNode json() {
            var m = new ObjectMapper();
            var o = m.createObjectNode();
            o.put("model", spec.key());
            o.put("parameters", spec.parameters());
            o.put("weight_bytes_per_token", weightBytesPerToken);
            o.put("threads", threads);
            o.put("kernels", kernels);
            o.put("read_bandwidth_gbs", readGbs.median());
            o.put("read_bandwidth_java_gbs", readJavaGbs.median());
            if (readNativeGbs != null) o.put("read_bandwidth_native_gbs", readNativeGbs.median());
            var d = o.putObject("decode_tokens_per_s");
            decodeTps.forEach((c, f) -> d.put(Integer.toString(c), f.median()));
            o.put("decode_weight_gbs", decodeWeightGbs());
            o.put("decode_bandwidth_ratio", bandwidthRatio());
            o.put("decode_2048_over_128", ratio2048over128());
            o.put("prefill_tokens_per_s", prefillTps.median());
            o.put("prefill_over_decode", prefillOverDecode());
            o.put("idle_probe_overhead", idleOverhead());
            o.put("dump_overhead", dumpOverhead());
            o.put("compare_gbs", compareGbs.median());
            o.put("compare_bandwidth_ratio", compareRatio());
            o.put("compare_first_run_gbs", compareFirstGbs.median());
            o.put("peak_rss_bytes", peakRss);
            o.put("prefix_tokens", PREFIX);
            o.put("new_tokens", suffix());
            o.put("ttft_cold_s", ttftColdS.median());
            o.put("ttft_prefix_reuse_s", ttftPrefixS.median());
            o.put("prefix_reuse_speedup", prefixSpeedup());
            o.put("ttft_second_turn_s", ttftTurnS.median());
            o.put("second_turn_speedup", turnSpeedup());
            var kb = o.putObject("kv_bytes_per_token");
            kvBytes.forEach((t, b) -> kb.put(t.id(), b));
            var kp = o.putObject("kv_prefill_tokens_per_s");
            var kr = o.putObject("kv_prefill_over_f32");
            var kd = o.putObject("kv_decode_512_tokens_per_s");
            for (var t : KvType.values()) {
                kp.put(t.id(), kvPrefill(t).median());
                kr.put(t.id(), kvPrefill(t).median() / prefillTps.median());
                kd.put(t.id(), kvDecode(t).median());
            }
            var f = o.putObject("figures");
            put(f, "read_bandwidth_gbs", readGbs);
            put(f, "read_bandwidth_java_gbs", readJavaGbs);
            if (readNativeGbs != null) put(f, "read_bandwidth_native_gbs", readNativeGbs);
            decodeTps.forEach((c, x) -> put(f, "decode_tokens_per_s_" + c, x));
            put(f, "prefill_tokens_per_s", prefillTps);
            put(f, "decode_ms_no_probe", noProbeMs);
            put(f, "decode_ms_idle_probe", idleProbeMs);
            put(f, "decode_ms_dump", dumpMs);
            put(f, "compare_gbs", compareGbs);
            put(f, "compare_first_run_gbs", compareFirstGbs);
            put(f, "ttft_cold_s", ttftColdS);
            put(f, "ttft_prefix_reuse_s", ttftPrefixS);
            put(f, "ttft_second_turn_s", ttftTurnS);
            kvPrefillTps.forEach((t, x) -> put(f, "kv_prefill_tokens_per_s_" + t.id(), x));
            kvDecodeTps.forEach((t, x) -> put(f, "kv_decode_512_tokens_per_s_" + t.id(), x));
            var t = o.putObject("targets");
            targets().forEach(t::put);
            return o;
        }

        private static void put(ObjectNode o, String k, Figure f) {
            o.putObject(k).put("min", f.min()).put("median", f.median()).put("max", f.max()).put("samples", f.samples());
        }

        Map<String, Boolean> targets() {
            var t = new LinkedHashMap<String, Boolean>();
            t.put("decode_weight_traffic_ge_0.85_read_bandwidth", bandwidthRatio() >= 0.85);
            t.put("decode_2048_le_1.25_decode_128", ratio2048over128() <= 1.25);
            t.put("prefill_ge_6_decode", prefillOverDecode() >= 6);
            t.put("idle_probe_le_1.02", idleOverhead() <= 1.02);
            t.put("compare_ge_0.5_read_bandwidth", compareRatio() >= 0.5);
            t.put("prefix_reuse_ttft_ge_10x", prefixSpeedup() >= 10);
            t.put("no_kv_prefill_cliff", worstKvPrefillRatio() >= 0.5);
            return t;
        }

        void print(PrintWriter out) {
            out.println("decodiff bench — " + spec.describe());
            out.println("machine: " + machine + ", " + threads + " threads; weights read per decode token: %.3f GB".formatted(weightBytesPerToken / 1e9));
            out.println("kernels: " + kernels);
            out.println("median (min, max, samples):");
            out.println("  read bandwidth          " + readGbs.format("%7.2f") + " GB/s  (the faster streaming read: Java %.2f%s)"
                    .formatted(readJavaGbs.median(), readNativeGbs == null ? "" : ", native %.2f".formatted(readNativeGbs.median())));
            for (int c : CONTEXTS) out.println("  decode @ctx %-5d       ".formatted(c) + decodeTps.get(c).format("%7.2f") + " tok/s");
            out.println("  decode weight traffic   %7.2f GB/s at ctx 512".formatted(decodeWeightGbs()));
            out.println("  prefill %d tokens      ".formatted(PREFILL) + prefillTps.format("%7.1f") + " tok/s");
            out.println("  decode step, no probe   " + noProbeMs.format("%7.1f") + " ms");
            out.println("  decode step, idle probe " + idleProbeMs.format("%7.1f") + " ms");
            out.println("  decode step, dump       " + dumpMs.format("%7.1f") + " ms  (%.1f MB per step written)".formatted(dumpBytes / 1e6));
            out.println("  compare                 " + compareGbs.format("%7.2f") + " GB/s of tensor data (warm; first, cold run: %.2f)".formatted(compareFirstGbs.median()));
            out.println("  peak RSS                %7.2f GB".formatted(peakRss / 1e9));
            out.println("  TTFT, %d tokens cold    ".formatted(PREFIX + suffix()) + ttftColdS.format("%7.2f") + " s");
            out.println("  TTFT, %d-token prefix reused + %d new ".formatted(PREFIX, suffix()) + ttftPrefixS.format("%7.3f") + " s");
            out.println("  TTFT, second turn of %d new tokens    ".formatted(suffix()) + ttftTurnS.format("%7.3f") + " s");
            out.println("  KV cache type   bytes/token   prefill %d tok/s (× f32)   decode @512 tok/s".formatted(PREFILL));
            for (var t : KvType.values())
                out.println("    %-5s        %10d   %8.1f (%4.2f)               %6.2f".formatted(t.id(), kvBytes.get(t), kvPrefill(t).median(),
                        kvPrefill(t).median() / prefillTps.median(), kvDecode(t).median()));
            out.println("ratios (targets):");
            out.println("  decode weight traffic / read bandwidth  %5.2f  (≥ 0.85) %s".formatted(bandwidthRatio(), ok(bandwidthRatio() >= 0.85)));
            out.println("  decode time @2048 / @128                %5.2f  (≤ 1.25) %s".formatted(ratio2048over128(), ok(ratio2048over128() <= 1.25)));
            out.println("  prefill tok/s / decode tok/s            %5.2f  (≥ 6)    %s".formatted(prefillOverDecode(), ok(prefillOverDecode() >= 6)));
            out.println("  idle probe / no probe                   %5.3f  (≤ 1.02) %s".formatted(idleOverhead(), ok(idleOverhead() <= 1.02)));
            out.println("  dump / no probe                         %5.2f".formatted(dumpOverhead()));
            out.println("  compare / read bandwidth                %5.2f  (≥ 0.5)  %s".formatted(compareRatio(), ok(compareRatio() >= 0.5)));
            out.println("ratios (prefix reuse):");
            out.println("  TTFT cold / prefix reused               %5.1f  (≥ 10)   %s".formatted(prefixSpeedup(), ok(prefixSpeedup() >= 10)));
            out.println("  TTFT re-read conversation / second turn %5.1f".formatted(turnSpeedup()));
            out.println("  slowest quantized-KV prefill / f32      %5.2f  (no cliff: ≥ 0.5) %s".formatted(worstKvPrefillRatio(), ok(worstKvPrefillRatio() >= 0.5)));
        }

        private static String ok(boolean b) { return b ? "holds" : "MISSED"; }
    }

    private Result run(BenchSpec bs, Path dir, Gemma4Model model, Path work, java.util.function.Consumer<String> log) throws IOException {
        var rnd = new SplittableRandom(bs.seed());
        int vocab = model.config().vocabSize();
        int maxCtx = CONTEXTS[CONTEXTS.length - 1];
        int[] prompt = new int[maxCtx];
        for (int i = 0; i < prompt.length; i++) prompt[i] = 3 + rnd.nextInt(vocab - 3);
        long wpt = model.weightBytesPerToken();

        // 1. read bandwidth over the whole weights file, the same pages the engine reads, with the same threads: the
        //    Java streaming read and, where the native kernels run, the native one (it prefetches, as the native
        //    matvec does); the faster of the two is the yardstick. Samples alternate so drift hits both alike.
        log.accept("read bandwidth (" + Parallel.threads() + " threads; kernels: " + NativeKernels.status() + ")…");
        Figure readJava, readNative = null;
        try (var arena = Arena.ofShared(); var ch = FileChannel.open(dir.resolve("model.safetensors"), StandardOpenOption.READ)) {
            var seg = ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size(), arena);
            StreamRead.read(seg); // page in
            StreamRead.read(seg, true);
            boolean nat = NativeKernels.available();
            double[] sj = new double[2 * repeats + 1], sn = new double[sj.length];
            for (int i = 0; i < sj.length; i++) {
                long t0 = System.nanoTime();
                StreamRead.read(seg, false);
                sj[i] = (System.nanoTime() - t0) / 1e9;
                if (!nat) continue;
                t0 = System.nanoTime();
                StreamRead.read(seg, true);
                sn[i] = (System.nanoTime() - t0) / 1e9;
            }
            readJava = Figure.rates(seg.byteSize() / 1e9, sj);
            if (nat) readNative = Figure.rates(seg.byteSize() / 1e9, sn);
        }
        Figure readGbs = readNative != null && readNative.median() > readJava.median() ? readNative : readJava;

        // 2. warm-up: let the JIT compile the prefill and decode paths before anything is timed. The prefill is
        //    full-length (untimed): a short one leaves the GEMM's long-chunk paths and C2 compilation to the first
        //    timed prefill.
        log.accept("warm-up…");
        {
            var s = model.newSession();
            int next = Sampler.argmax(s.forward(java.util.Arrays.copyOf(prompt, PREFILL)));
            for (int i = 0; i < 16; i++) next = Sampler.argmax(s.forward(new int[]{next}));
        }

        // 3. prefill of 512 tokens, repeated; the last session goes on to decode at 512.
        log.accept("prefill " + PREFILL + " tokens ×" + repeats + "…");
        double[] pre = new double[repeats];
        InferenceSession session = null;
        float[] logits = null;
        for (int i = 0; i < repeats; i++) {
            session = model.newSession();
            long t0 = System.nanoTime();
            logits = session.forward(java.util.Arrays.copyOf(prompt, PREFILL));
            pre[i] = (System.nanoTime() - t0) / 1e9;
        }
        Figure prefillTps = Figure.rates(PREFILL, pre);

        // 4. time to first token of a 2048-token request read cold (issue 6 point 4; also what re-reading a whole
        //    conversation costs); then decode at contexts 128 (its own session), 512 (the prefilled session) and 2048
        //    (the cold one), one step of each in turn, so that drift over the run (other tenants, clocks) hits the
        //    three alike and their ratio is measured in one stretch of time.
        log.accept("TTFT: " + maxCtx + " tokens cold…");
        var cold = model.newSession();
        long c0 = System.nanoTime();
        float[] l2 = cold.forward(prompt);
        Figure ttftCold = Figure.of((System.nanoTime() - c0) / 1e9);
        var s128 = model.newSession();
        float[] l128 = s128.forward(java.util.Arrays.copyOf(prompt, 128));
        log.accept("decode @128/512/2048, interleaved…");
        var decode = decodeInterleaved(new InferenceSession[]{s128, session, cold}, new float[][]{l128, logits, l2}, CONTEXTS, decodeSteps);
        long peak = peakRss();
        cold = null;
        s128 = null;

        // 5. capture overhead at ~512, modes interleaved step by step so drift hits all three alike.
        log.accept("probe and dump overhead…");
        Path stepDump = work.resolve("overhead-dump");
        var dw = DumpWriter.create(stepDump, false, producer(), modelInfo(model), List.of(), 0);
        var idle = new Probe() {
            @Override public boolean wants(String point) { return false; }
            @Override public float[] capture(String point, int[] shape, float[] data) { return null; }
        };
        var capture = new CapturingProbe(p -> true);
        double[][] modeMs = new double[3][decodeSteps];
        int next = Sampler.argmax(logits); // any token does for timing; the session is past the prefill by now
        for (int i = 0; i < decodeSteps; i++) {
            for (int mode = 0; mode < 3; mode++) {
                session.setProbe(mode == 0 ? null : mode == 1 ? idle : capture);
                int start = session.position();
                long t0 = System.nanoTime();
                float[] l = session.forward(new int[]{next});
                next = Sampler.argmax(l);
                if (mode == 2) dw.writeStep(start, 1, capture.take().values(), next, LiveStep.top2Margin(l));
                modeMs[mode][i] = (System.nanoTime() - t0) / 1e6;
            }
        }
        session.setProbe(null);
        long dumpBytes = dirBytes(stepDump) / Math.max(1, dw.stepsWritten());

        // 6. issue 6 point 4: the 2048-token request resumed from a stored 2000-token snapshot (PrefixCache); the
        // 48-token second turn of a kept session.
        log.accept("TTFT: " + PREFIX + "-token prefix snapshot reused, second turn…");
        var kept = model.newSession();
        kept.forward(java.util.Arrays.copyOf(prompt, PREFIX));
        var snap = kept.snapshot();
        int[] turn = java.util.Arrays.copyOfRange(prompt, PREFIX, maxCtx);
        double[] turnS = new double[repeats];
        for (int i = 0; i < repeats; i++) {
            if (i > 0) kept.restore(snap); // back to the end of the first turn, untimed
            long t0 = System.nanoTime();
            kept.forward(turn);
            turnS[i] = (System.nanoTime() - t0) / 1e9;
        }
        kept = null;
        var prefixCache = new PrefixCache();
        prefixCache.store(snap);
        double[] prefixS = new double[repeats];
        for (int i = 0; i < repeats; i++) {
            long t0 = System.nanoTime();
            var r = prefixCache.resume(model, EngineOptions.defaults(), prompt);
            prefixS[i] = (System.nanoTime() - t0) / 1e9;
            if (r.reusedTokens() != PREFIX) throw new IllegalStateException("prefix cache reused " + r.reusedTokens() + " tokens, expected " + PREFIX);
        }
        snap = null;
        prefixCache = null;
        peak = Math.max(peak, peakRss());

        // 7. KV cache types (issue 6 point 2): bytes per token, prefill of 512 tokens and decode @512 next to f32.
        var kvBytes = new LinkedHashMap<KvType, Long>();
        var kvPrefill = new LinkedHashMap<KvType, Figure>();
        var kvDecode = new LinkedHashMap<KvType, Figure>();
        for (var t : KvType.values()) {
            var opts = EngineOptions.defaults().withKvTypes(t, t);
            kvBytes.put(t, model.newSession(opts).kvBytesPerPosition());
            if (t == KvType.F32) continue;
            log.accept("KV cache " + t.id() + ": prefill " + PREFILL + " tokens ×" + repeats + ", decode @512…");
            double[] ks = new double[repeats];
            InferenceSession ts = null;
            float[] tl = null;
            for (int i = 0; i < repeats; i++) {
                ts = model.newSession(opts);
                long t0 = System.nanoTime();
                tl = ts.forward(java.util.Arrays.copyOf(prompt, PREFILL));
                ks[i] = (System.nanoTime() - t0) / 1e9;
            }
            kvPrefill.put(t, Figure.rates(PREFILL, ks));
            kvDecode.put(t, decodeInterleaved(new InferenceSession[]{ts}, new float[][]{tl}, new int[]{PREFILL}, decodeSteps).get(PREFILL));
        }

        // 8. compare throughput on a large dump pair: a 512-token prefill step plus decode steps, every point.
        log.accept("compare…");
        Path a = work.resolve("dump-a"), b = work.resolve("dump-b");
        writeDump(model, prompt, a);
        copyTree(a, b);
        long pairBytes = tensorBytes(a) + tensorBytes(b);
        // Warm-up, as for decode and prefill: the first compare runs the cell kernel in the interpreter and C1 (the
        // Vector API is fast only once C2 has compiled it), which takes more than one pass over a pair this size.
        // The first pass is reported on its own (what a single cold `decodiff compare` sees).
        long w0 = System.nanoTime();
        Comparison.compareDumps(a, b, Comparison.Options.defaults());
        Figure compareFirstGbs = Figure.rates(pairBytes / 1e9, new double[]{(System.nanoTime() - w0) / 1e9});
        for (int runs = 1; runs < 3 || System.nanoTime() - w0 < 3_000_000_000L; runs++) Comparison.compareDumps(a, b, Comparison.Options.defaults());
        double[] cmp = new double[Math.max(repeats, 5)];
        for (int i = 0; i < cmp.length; i++) {
            long t0 = System.nanoTime();
            var result = Comparison.compareDumps(a, b, Comparison.Options.defaults());
            cmp[i] = (System.nanoTime() - t0) / 1e9;
            if (result == null) throw new IllegalStateException("no comparison result");
        }
        Figure compareGbs = Figure.rates(pairBytes / 1e9, cmp);
        peak = Math.max(peak, peakRss());

        return new Result(bs, machine(), Parallel.threads(), NativeKernels.status(), wpt, readGbs, readJava, readNative, decode, prefillTps, Figure.of(modeMs[0]), Figure.of(modeMs[1]),
                Figure.of(modeMs[2]), dumpBytes, compareGbs, compareFirstGbs, peak, ttftCold, Figure.of(prefixS), Figure.of(turnS), kvBytes, kvPrefill, kvDecode);
    }

    /** Greedy decode steps on one or several sessions, one step of each in turn; tokens/s per step, by context. */
    private static LinkedHashMap<Integer, Figure> decodeInterleaved(InferenceSession[] sessions, float[][] logits, int[] contexts, int n) {
        int[] next = new int[sessions.length];
        double[][] sec = new double[sessions.length][n];
        for (int k = 0; k < sessions.length; k++) {
            sessions[k].setProbe(null);
            next[k] = Sampler.argmax(logits[k]);
        }
        for (int i = 0; i < n; i++) {
            for (int k = 0; k < sessions.length; k++) {
                long t0 = System.nanoTime();
                next[k] = Sampler.argmax(sessions[k].forward(new int[]{next[k]}));
                sec[k][i] = (System.nanoTime() - t0) / 1e9;
            }
        }
        var out = new LinkedHashMap<Integer, Figure>();
        for (int k = 0; k < sessions.length; k++) out.put(contexts[k], Figure.rates(1, sec[k]));
        return out;
    }

    private static void writeDump(Gemma4Model model, int[] prompt, Path out) {
        var probe = new CapturingProbe(p -> true);
        var tokens = new ArrayList<Integer>();
        for (int i = 0; i < PREFILL; i++) tokens.add(prompt[i]);
        var w = DumpWriter.create(out, false, producer(), modelInfo(model), tokens, PREFILL);
        var s = model.newSession(dev.decodiff.engine.EngineOptions.defaults().withProbe(probe));
        int[] feed = java.util.Arrays.copyOf(prompt, PREFILL);
        for (int step = 0; step < 3; step++) {
            int start = s.position();
            float[] l = s.forward(feed);
            int next = Sampler.argmax(l);
            tokens.add(next);
            w.setTokens(tokens);
            w.writeStep(start, feed.length, probe.take().values(), next, LiveStep.top2Margin(l));
            feed = new int[]{next};
        }
        w.finish();
    }

    private static DumpManifest.Producer producer() { return new DumpManifest.Producer("decodiff-bench", "dev", "float32", "decodiff-java"); }

    private static DumpManifest.Model modelInfo(Gemma4Model m) {
        return new DumpManifest.Model("gemma4_text", m.config().numLayers(), m.configSha256(), null);
    }

    /** VmHWM of this process: the peak resident set, mapped weight pages included. */
    static long peakRss() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status")))
                if (line.startsWith("VmHWM:")) return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
        } catch (IOException | RuntimeException ignored) {
            // not Linux: fall back to the heap in use
        }
        var rt = Runtime.getRuntime();
        return rt.totalMemory() - rt.freeMemory();
    }

    private static String machine() {
        String cpu = System.getProperty("os.arch");
        try {
            for (String line : Files.readAllLines(Path.of("/proc/cpuinfo")))
                if (line.startsWith("model name")) { cpu = line.substring(line.indexOf(':') + 1).strip(); break; }
        } catch (IOException | RuntimeException ignored) {
            // keep os.arch
        }
        return cpu + ", " + Runtime.getRuntime().availableProcessors() + " cpus";
    }

    private static long tensorBytes(Path dump) throws IOException {
        long n = 0;
        try (var s = Files.list(dump)) {
            for (Path p : s.filter(p -> p.getFileName().toString().endsWith(".safetensors")).toList()) n += Files.size(p);
        }
        return n;
    }

    private static long dirBytes(Path dir) throws IOException {
        try (var s = Files.walk(dir)) {
            return s.filter(Files::isRegularFile).mapToLong(p -> {
                try { return Files.size(p); } catch (IOException e) { throw new UncheckedIOException(e); }
            }).sum();
        }
    }

    /**
     * Copies the dump in whole 4 MiB writes, as decodiff's own writer writes (so both sides of the pair sit in the page
     * cache the same way; Files.copy's in-kernel copy leaves the copy in 4 KB pages, slower to map).
     */
    private static void copyTree(Path from, Path to) throws IOException {
        Files.createDirectories(to);
        var buf = java.nio.ByteBuffer.allocateDirect(4 << 20);
        try (var s = Files.list(from)) {
            for (Path p : s.toList()) {
                try (var in = FileChannel.open(p, StandardOpenOption.READ);
                     var out = FileChannel.open(to.resolve(p.getFileName()), StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                    for (long done = 0, size = in.size(); done < size; ) {
                        buf.clear();
                        while (buf.hasRemaining() && in.read(buf) > 0) {
                            // fill the chunk
                        }
                        buf.flip();
                        if (!buf.hasRemaining()) throw new IOException(p + " ended early while being copied");
                        while (buf.hasRemaining()) done += out.write(buf);
                    }
                }
            }
        }
    }

    private static void deleteTree(Path p) {
        try (var s = Files.walk(p)) {
            for (Path q : s.sorted(Comparator.reverseOrder()).toList()) Files.deleteIfExists(q);
        } catch (IOException ignored) {
            // temporary files only
        }
    }
}
