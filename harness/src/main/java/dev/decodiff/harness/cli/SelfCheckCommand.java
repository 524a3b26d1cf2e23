package dev.decodiff.harness.cli;

import dev.decodiff.harness.Home;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.live.ModelLocator;
import dev.decodiff.harness.report.SelfCheckReport;
import dev.decodiff.harness.report.Terminal;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.Callable;

@Command(name = "selfcheck", mixinStandardHelpOptions = true,
        description = {"Checks the engine against itself, with no reference: decode vs prefill, chunking, cache reads vs writes, cache policies, work.",
                "The same tokens computed along different paths must agree to fp32 noise (prompt + decode vs one pass, chunked prefill vs one pass, probes attached vs none, prefix reuse, multi-turn, snapshot restore),",
                "every read window must hold what entered the cache, a decode step must process 1 position, and a sliding ring must refuse a cut it cannot honour.",
                "On a model with recurrent caches (Qwen3.5) the checks are about handing the conv and linear-attention states over: chunked prefill vs one-token steps, snapshot/restore, prefix reuse with the states checkpointed, and the wrong reuse (attention KV without its states) caught at the state read.",
                "A disagreement is localized to its first (position, capture point)."},
        footer = {"", "Exit codes: 0 every check passes, 1 a check fails, 2 bad input or usage.",
                "Examples:",
                "  decodiff selfcheck",
                "  decodiff selfcheck --model checkpoints/gemma4-tiny-ple --fault ring-wrap --json",
                "  decodiff selfcheck --model checkpoints/qwen35-tiny   (recurrent caches: chunked prefill vs one-token steps, snapshot/restore,",
                "                                                        prefix reuse with the state checkpointed, the wrong reuse caught)",
                "  decodiff selfcheck --engine llama.cpp   (decode vs prefill, chunked prefill, capture vs none, on llama.cpp)",
                "  decodiff selfcheck --engine llama.cpp --model checkpoints/qwen35-tiny-llamacpp   (llama.cpp's Qwen3.5: states read vs written,",
                "                                                        decode, one-token steps, calls and ubatches of 3 and 65 vs one pass)"})
final class SelfCheckCommand implements Callable<Integer> {
    @Option(names = "--model", paramLabel = "DIR", description = "Checkpoint to check (default: the bundled checkpoints/gemma4-tiny).")
    Path model;

    @picocli.CommandLine.Mixin
    EngineFlags engine = new EngineFlags();

    @picocli.CommandLine.Mixin
    LlamaCppFlags llama = new LlamaCppFlags();

    @picocli.CommandLine.Mixin
    JsonOption json = new JsonOption();

    @picocli.CommandLine.Spec
    picocli.CommandLine.Model.CommandSpec spec;

    static Path defaultModel() {
        Path tiny = Home.get().resolve("checkpoints/gemma4-tiny");
        if (Files.isRegularFile(tiny.resolve("config.json"))) return tiny;
        var all = ModelLocator.bundled(Home.get());
        if (all.isEmpty()) throw new BadInputException(Home.get().resolve("checkpoints"), "holds no checkpoint; pass --model DIR");
        return all.get(0);
    }

    @Override
    public Integer call() {
        Path dir = model != null ? model : defaultModel();
        var arch = dev.decodiff.engine.arch.Architectures.of(dir);
        var tunable = dev.decodiff.harness.arch.ArchitectureSupports.of(arch).tunableEngine();
        if (tunable.isEmpty()) return recurrent(dir, arch);
        if (llama.isLlamaCpp()) return llamaCpp(dir, arch);
        var options = engine.options();
        long t0 = System.nanoTime();
        try (var m = tunable.get().load(dir)) {
            var checked = tunable.get().selfCheck(m, options);
            double secs = (System.nanoTime() - t0) / 1e9;
            String how = dev.decodiff.harness.live.EngineSetup.describe(options);
            var run = new SelfCheckReport.Run(dir, how.isEmpty() ? "none" : how, checked.tokens().length, checked.promptLength(), checked.window(),
                    checked.results(), secs);
            var out = spec.commandLine().getOut();
            if (json.on()) out.println(SelfCheckReport.json(run));
            else out.print(SelfCheckReport.terminal(run, Terminal.colourStdout()));
            out.flush();
            return run.passed() ? Main.MATCH : Main.DIVERGENCE;
        }
    }

    /**
     * Another architecture through the plug-in seam: the recurrent-cache checks (chunked prefill vs one-token steps,
     * snapshot/restore, prefix reuse with the state checkpointed, the wrong reuse caught at the state read).
     */
    private int recurrent(Path dir, dev.decodiff.engine.arch.Architecture arch) {
        if (llama.isLlamaCpp()) return llamaCpp(dir, arch);
        if (!engine.onlyFaults()) throw new BadInputException("--kv-cache and --matmul apply to Gemma 4's engine; drop them for " + dir);
        var faults = engine.faultIds(arch, dir);
        long t0 = System.nanoTime();
        try (var m = arch.load(dir)) {
            var check = new dev.decodiff.harness.selfcheck.RecurrentSelfCheck(m, faults);
            int[] tokens = check.defaultTokens();
            int prompt = check.defaultPromptLength();
            var results = check.runAll(tokens, prompt);
            double secs = (System.nanoTime() - t0) / 1e9;
            var run = new SelfCheckReport.Run(dir, faults.isEmpty() ? "none" : "faults " + String.join(",", faults), tokens.length, prompt, 0, results, secs);
            var out = spec.commandLine().getOut();
            if (json.on()) out.println(SelfCheckReport.json(run));
            else out.print(SelfCheckReport.terminal(run, Terminal.colourStdout()));
            out.flush();
            return run.passed() ? Main.MATCH : Main.DIVERGENCE;
        }
    }

    /**
     * The checks that apply to llama.cpp, by the checkpoint's architecture: Gemma 4's decode vs prefill, chunked prefill
     * and capture vs none (its cache policies are its own); Qwen3.5's conv and recurrent states handed over along every
     * split (state audit, decode, calls, ubatches).
     */
    private int llamaCpp(Path dir, dev.decodiff.engine.arch.Architecture arch) {
        var plan = dev.decodiff.harness.arch.ArchitectureSupports.llamaCppSelfChecks(arch).plan(dir);
        var gguf = llama.resolveGguf(dir, false);
        var options = llama.options(engine, plan.tokenCount());
        return llamaCpp(gguf, options, plan.checks().apply(gguf, options), plan.window());
    }

    private int llamaCpp(Path gguf, dev.decodiff.llamacpp.ffi.LlamaContext.Options options, dev.decodiff.harness.selfcheck.LlamaCppSelfCheck check, int window) {
        long t0 = System.nanoTime();
        try {
            int[] tokens = check.defaultTokens();
            int prompt = check.promptLength();
            var results = check.runAll(tokens, prompt);
            double secs = (System.nanoTime() - t0) / 1e9;
            String how = dev.decodiff.llamacpp.LlamaCppRunner.describeRelease() + ", " + dev.decodiff.llamacpp.ffi.LlamaContext.describe(options);
            var run = new SelfCheckReport.Run(gguf, how, tokens.length, prompt, window, results, secs);
            var out = spec.commandLine().getOut();
            if (json.on()) out.println(SelfCheckReport.json(run));
            else out.print(SelfCheckReport.terminal(run, Terminal.colourStdout()));
            out.flush();
            return run.passed() ? Main.MATCH : Main.DIVERGENCE;
        } catch (dev.decodiff.llamacpp.ffi.LlamaCppException e) {
            throw new BadInputException(e.getMessage(), e);
        }
    }
}
