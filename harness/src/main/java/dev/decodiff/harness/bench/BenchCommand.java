package dev.decodiff.harness.bench;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.OutputPaths;
import dev.decodiff.harness.report.Fmt;
import picocli.CommandLine.Command;
import dev.decodiff.engine.EngineOptions;
import dev.decodiff.metal.MatmulPrecision;
import picocli.CommandLine.Option;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.concurrent.Callable;
import java.util.function.Consumer;

/**
 * {@code decodiff bench}: synthesizes (once, cached) a random Gemma 4 checkpoint of realistic geometry and measures,
 * in one run, the machine's read bandwidth and the engine's decode, prefill, capture and compare speed, as ratios.
 * Each phase is its own class returning its own figures; {@link BenchReport} prints them. Every figure is the median
 * of several samples, with min and max.
 */
@Command(name = "bench", mixinStandardHelpOptions = true,
        description = {"Measures decode/prefill speed against the machine's memory bandwidth, probe and dump overhead, compare throughput "
                + "and what a one-shot `decodiff run` costs (a fresh JVM's prefill against the same prefill warm, and its wall time), "
                + "on a random Gemma 4 checkpoint synthesized once and cached (default: a 1.06 B-parameter model, 2.1 GB in bf16)."},
        footer = {"", "Examples:", "  decodiff bench", "  decodiff bench --size small --json", "  decodiff bench --size default,layers=6",
                "  decodiff bench --size e2b --core", "  decodiff bench --size qwen35-0.8b --json", "  decodiff bench --against llama.cpp", "  decodiff bench --quantized 4,8 --decode-steps 16", "  decodiff bench --size e2b --compare-rss 4096",
                "  decodiff bench --size e2b --compare-time 4096 --keep-reference"})
public final class BenchCommand implements Callable<Integer> {
    @Option(names = "--size", paramLabel = "SPEC", defaultValue = "default",
            description = "Preset (default = 1.06 B params/2.1 GB, small ≈ 100 MB; e2b = Gemma 4 E2B's geometry with PLE and KV sharing, ≈ 4.6 B "
                    + "params/9.2 GB; 26b-a4b = Gemma 4 26B-A4B's width with 128 experts, two layers deep, 2.3 B/4.7 GB; qwen35-0.8b = Qwen3.5-0.8B's "
                    + "text decoder, measured in bf16 and as its MLX 4-bit conversion: decode at 128/512/2048 against the read ceiling, the recurrent "
                    + "step's own cost, a 512-token prefill and the peak RSS; qwen35-tiny = a few MB of the same kinds of layer) with optional overrides, "
                    + "e.g. 'default,layers=12' (keys: hidden, layers, heads, kv, head_dim, global_head_dim, ffn, vocab, window, seed, "
                    + "period, global_kv, ple, kv_shared, experts, top_k, moe_ffn).")
    String size;

    @Option(names = "--json", description = "Print the figures as JSON on stdout (progress still goes to stderr).")
    boolean json;

    @Option(names = "--cache", paramLabel = "DIR", description = "Where synthesized checkpoints are kept (default ~/.cache/decodiff/bench).")
    Path cache;

    @Option(names = "--decode-steps", paramLabel = "N", defaultValue = "8", description = "Timed decode steps per context (default 8; the KV cache types, each against f32, 2N each).")
    int decodeSteps;

    @Option(names = "--repeats", paramLabel = "N", defaultValue = "3", description = "Repeats of prefill, compare and bandwidth runs (default 3; bandwidth runs 2N+1, compare max(N, 5) after a 3 s warm-up).")
    int repeats;

    @Option(names = "--core", description = "Measure only the ceilings, prefill, decode and peak RSS (for the large real-shape presets, "
            + "where capture overhead, prefix reuse, the KV types, compare and the one-shot run take long).")
    boolean core;

    @Option(names = "--against", paramLabel = "ENGINE",
            description = "Also run the bench model through this engine (llama.cpp: the checkpoint converted to a bf16 GGUF, f32 K/V, the same threads, "
                    + "at llama-bench's settings: batches of 2048 computed 512 at a time, a polling threadpool, an untimed warm-up, the last token's logits "
                    + "only; flash attention auto and off, each figure against the faster), interleaved with decodiff in --repeats rounds, and print "
                    + "decodiff/llama.cpp for decode @128/512/2048, prefill 512 and prefill 512 with --matmul bf16, then decodiff bf16 K/V against "
                    + "llama.cpp f16 K/V at 512. The llama.cpp is an explicit DECODIFF_LLAMACPP_LIB, else scripts/llamacpp-native.sh's build when made, "
                    + "else the prebuilt; the report names it (build, CPU backend, flags). With a llama-bench beside its libraries (a native build's), "
                    + "each round also runs llama.cpp's own llama-bench on the same GGUF and threads, f32 K/V, and prints its figures beside the runner's. "
                    + "With a qwen35 preset: the bf16 model against llama.cpp the same way, decode @128/512/2048 and prefill 512, and llama.cpp's decode "
                    + "over the same best read pass.")
    String against;

    @Option(names = "--compare-rss", paramLabel = "N",
            description = "Measure only the memory of a live compare of an N-token prompt (e.g. 4096) on this model, run as a user runs it: "
                    + "`decodiff compare` in its own JVM with the launcher's default heap, against a dump of the prefill and one decode step "
                    + "made first (also in its own JVM; large: 5.2 GB for 4096 tokens on e2b, deleted after unless --keep-reference). "
                    + "Prints the peak RSS, what it is made of (checkpoint pages, reference pages, anonymous memory), the most heap used and the time.")
    Integer compareRss;

    @Option(names = "--quantized", paramLabel = "BITS",
            description = "Measure only decode of the bench model's MLX affine conversions at these bit widths (4 and/or 8, e.g. 4,8; "
                    + "made once with checkpoints/make_mlx_checkpoints.py convert, NumPy, and cached beside it) against the bf16 model: all loaded "
                    + "at once, one step of each in turn (--decode-steps rounds, after 16 untimed ones) after a 128-token prompt; prints each one's tok/s, CPU time per "
                    + "token, weight bytes per token against the best read pass and (median) against the pass right after each step's round, the resident "
                    + "memory its load added, and its speed over bf16.")
    String quantized;

    @Option(names = "--compare-time", paramLabel = "N",
            description = "Measure only a live compare of an N-token prompt (e.g. 4096) on this model exactly as a user runs it, observer check "
                    + "included: `decodiff compare` in its own JVM with the launcher's flags and default heap, against the same reference as "
                    + "--compare-rss. Prints the wall and CPU time split into its parts (load, prefill, decode, reference reads, staging, compare "
                    + "kernels, attribution, the observer check, report), the load average it ran under, and the peak RSS.")
    Integer compareTime;

    @Option(names = "--keep-reference", description = "With --compare-rss or --compare-time: keep the reference dump in the cache folder for the next run "
            + "(and reuse one kept before).")
    boolean keepReference;

    @picocli.CommandLine.Spec
    picocli.CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() throws IOException {
        if (decodeSteps < 2 || repeats < 1) throw new BadInputException("--decode-steps must be ≥ 2 and --repeats ≥ 1");
        if (against != null && !against.equalsIgnoreCase("llama.cpp") && !against.equalsIgnoreCase("llamacpp"))
            throw new BadInputException("--against takes llama.cpp, got '" + against + "'");
        if (QwenBenchSpec.names(size)) return qwen();
        BenchSpec bs = BenchSpec.parse(size);
        if (cache != null) OutputPaths.refuseOverlap("--cache", cache, OutputPaths.withBundledData());
        PrintWriter err = spec.commandLine().getErr();
        long began = System.nanoTime();
        Consumer<String> log = s -> {
            err.print(Fmt.format("bench [%5.1f s] %s%n", BenchSetup.secondsSince(began), s));
            err.flush();
        };
        if (compareRss != null && compareRss < 1) throw new BadInputException("--compare-rss takes a prompt length of at least 1 token, got " + compareRss);
        if (compareTime != null && compareTime < 1) throw new BadInputException("--compare-time takes a prompt length of at least 1 token, got " + compareTime);
        if (compareRss != null && compareTime != null)
            throw new BadInputException("--compare-rss and --compare-time each run a live compare of their own; give one of them");
        Integer liveCompare = compareRss != null ? compareRss : compareTime;
        String which = compareRss != null ? "--compare-rss" : "--compare-time";
        if (keepReference && liveCompare == null) throw new BadInputException("--keep-reference goes with --compare-rss or --compare-time");
        if (liveCompare != null && against != null)
            throw new BadInputException(which + " measures only a live compare; run --against " + against + " as a bench of its own");
        if (liveCompare != null && core) throw new BadInputException(which + " measures only a live compare; --core is a bench of its own");
        if (quantized != null && (liveCompare != null || against != null || core))
            throw new BadInputException("--quantized measures only the quantized decode; run --compare-rss, --compare-time, --against or --core as a bench of its own");
        int[] bits = quantized == null ? null : QuantizedDecode.bits(quantized);
        Path root = cache != null ? cache : BenchCheckpoint.defaultCacheRoot();
        Path dir = BenchCheckpoint.ensure(bs, root, log);
        if (bits != null) {
            var r = QuantizedDecode.measure(bs, dir, bits, decodeSteps, log);
            var out = spec.commandLine().getOut();
            if (json) out.println(new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT).writeValueAsString(r.json()));
            else r.print(out);
            out.flush();
            return 0;
        }
        Path work = Files.createTempDirectory("decodiff-bench-");
        if (liveCompare != null) {
            try {
                // one cache folder for both options: the reference is the same dump
                var r = CompareRss.measure(bs, dir, liveCompare, compareTime != null, root.resolve(bs.key() + ".compare-rss-" + liveCompare), keepReference,
                        work, log);
                var out = spec.commandLine().getOut();
                if (json) out.println(new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT).writeValueAsString(r.json(bs)));
                else r.print(bs, out);
                out.flush();
                return 0;
            } finally {
                deleteTree(work);
            }
        }
        try (var setup = BenchSetup.load(bs, dir, repeats, decodeSteps, work, log)) {
            var r = run(bs, setup, core, against != null);
            var out = spec.commandLine().getOut();
            if (json) out.println(new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT).writeValueAsString(r.json()));
            else r.print(out);
            out.flush();
        } finally {
            deleteTree(work);
        }
        return 0;
    }

    /** The Qwen3.5 bench: its own phases, on its own checkpoints (see {@link QwenBench}). */
    private Integer qwen() throws IOException {
        if (quantized != null || compareRss != null || compareTime != null || keepReference)
            throw new BadInputException("--size " + size.strip() + " measures the Qwen3.5 engine in bf16 and MLX 4-bit (and beside llama.cpp with --against); "
                    + "--quantized, --compare-rss, --compare-time and --keep-reference go with the Gemma 4 presets");
        var qs = QwenBenchSpec.parse(size);
        if (cache != null) OutputPaths.refuseOverlap("--cache", cache, OutputPaths.withBundledData());
        PrintWriter err = spec.commandLine().getErr();
        long began = System.nanoTime();
        Consumer<String> log = s -> {
            err.print(Fmt.format("bench [%5.1f s] %s%n", BenchSetup.secondsSince(began), s));
            err.flush();
        };
        Path root = cache != null ? cache : BenchCheckpoint.defaultCacheRoot();
        Path dir = BenchCheckpoint.ensure(root, qs.key(), qs.describe(), qs.config(), qs.tensors(), qs.seed(), log);
        var r = QwenBench.measure(qs, dir, decodeSteps, repeats, against != null, log);
        var out = spec.commandLine().getOut();
        if (json) out.println(new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT).writeValueAsString(QwenBenchReport.json(r)));
        else QwenBenchReport.print(r, out);
        out.flush();
        return 0;
    }

    /** The phases in order, the machine's ceilings first; the prefilled session goes on to decode and capture. */
    private static BenchReport run(BenchSpec bs, BenchSetup b, boolean core, boolean againstLlamaCpp) throws IOException {
        var read = ReadBandwidth.measure(b);
        var compute = Compute.measure(b);
        var prefill = Prefill.measure(b);
        var decode = Decode.measure(b, prefill.last());
        var capture = core ? null : CaptureOverhead.measure(b, prefill.last());
        var prefix = core ? null : PrefixReuse.measure(b);
        var kv = core ? null : KvTypes.measure(b);
        var compare = core ? null : CompareThroughput.measure(b);
        Figure bf16Matmul = null;
        if (!core) {
            b.log().accept("prefill " + BenchSetup.PREFILL + " tokens with --matmul bf16 ×" + b.repeats() + "…");
            var bf16 = EngineOptions.defaults().withMatmul(MatmulPrecision.BF16);
            b.session(bf16).forward(b.prompt(BenchSetup.PREFILL)); // warm-up: its kernels compile untimed, as the f32 prefill's did
            bf16Matmul = Prefill.timed(b, bf16).tokensPerS();
        }
        var oneShot = core ? null : OneShot.measure(b);
        var machine = Machine.current();
        long rss = Machine.peakRss(); // before llama.cpp's model joins the process
        var vsLlamaCpp = againstLlamaCpp ? AgainstLlamaCpp.measure(b, machine.threads()) : null;
        return new BenchReport(bs, machine, b.weights().weightBytesPerToken(), read, compute, prefill.tokensPerS(), decode, capture, prefix,
                kv, compare, rss, bf16Matmul, vsLlamaCpp, oneShot, prefill.fmaTokensPerS(), prefill.amxOverFmaPerRound());
    }

    static void deleteTree(Path p) {
        try (var s = Files.walk(p)) {
            for (Path q : s.sorted(Comparator.reverseOrder()).toList()) Files.deleteIfExists(q);
        } catch (IOException ignored) {
            // temporary files only
        }
    }
}
