package dev.decodiff.harness.cli;

import dev.decodiff.harness.OutputPaths;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.harness.bisect.BisectReport;
import dev.decodiff.harness.bisect.Bisector;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.report.Terminal;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Spec;
import picocli.CommandLine.Option;

import java.nio.file.Path;
import java.util.concurrent.Callable;

@Command(name = "bisect", mixinStandardHelpOptions = true,
        description = {"Proves why a divergence happens: the culprit cell, the substitution that heals it, and whether the cache history is to blame.",
                "Runs the engine live against a reference dump, then, from compare's first divergent cell, re-runs it with the reference's tensors fed in: per layer the local error (on the reference's input and cache history) vs the",
                "accumulated one, which substituted tensor heals the culprit layer, whether a cache transplant over earlier steps heals the step,",
                "and a one-sentence diagnosis: where the culprit op, recomputed from the reference's inputs under one of its enumerated",
                "variants (a norm, the attention scale, mask or softmax, the activation, RoPE, the cache window, and the op's",
                "rewirings: a sub-op fed its neighbouring tensor, dropped, applied twice or moved, a weight taken from its neighbour,",
                "the MoE routing and per-expert scales, the per-layer inputs' scales, slice and join), reproduces the candidate, that",
                "variant by name — only when the runner-up is at least 10x further from the candidate; else \"two explanations fit\"."},
        footer = {"", "Exit codes: 0 no divergence, 1 divergence bisected, 2 bad input or usage.",
                "Examples:",
                "  decodiff bisect --fault k-eq-v-rotated-keys",
                "  decodiff bisect reference-dumps/gemma4-tiny/short --fault ring-wrap --json",
                "  decodiff bisect reference-dumps/gemma4-tiny-ple/long --fault kv-shared-first-source --html bisect.html"})
final class BisectCommand implements Callable<Integer> {
    @Mixin
    ReferenceArgs referenceArgs = new ReferenceArgs();

    @Mixin
    EngineFlags engine = new EngineFlags();

    @Mixin
    OutputArgs output = new OutputArgs();

    @Mixin
    LlamaCppFlags llama = new LlamaCppFlags();

    @Option(names = "--no-ops", description = "Skip the op-level check (every metal kernel against ND4J) that runs once a culprit is confirmed.")
    boolean noOps;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() {
        Path refDir = referenceArgs.dir();
        output.checkTargets(OutputPaths.withBundledData(refDir, referenceArgs.model()));
        var ref = referenceArgs.open();
        var profile = referenceArgs.profile(ref);
        Path modelDir = referenceArgs.locateModel(ref).dir();
        if (llama.isLlamaCpp()) return llamaCpp(refDir, ref, modelDir);
        var options = engine.options();
        try (var m = Gemma4Model.load(modelDir)) {
            dev.decodiff.harness.live.EngineSetup.checkKvFits(m, options);
            var result = new Bisector(m, options, ref, profile).run();
            // A culprit confirmed on the reference's own input: rule the kernels in or out at the op level.
            var opLevel = result.exitCode() == Main.DIVERGENCE && !noOps ? OpLevel.check() : null;
            output.deliver(spec,
                    () -> opLevel == null ? BisectReport.json(result) : OpLevel.addTo(BisectReport.json(result), opLevel),
                    () -> BisectReport.terminal(result, Terminal.colourStdout()) + (opLevel == null ? "" : opLevel.terminal()),
                    () -> BisectReport.html(result));
            return result.exitCode();
        }
    }

    /**
     * On llama.cpp, bisect's first level: each cell's local error, every op fed the reference's inputs and cache
     * history through the eval callback; the culprit is the first over one fp16 step.
     */
    private int llamaCpp(Path refDir, dev.decodiff.harness.dump.DumpReader ref, Path modelDir) {
        if (output.html != null) throw new dev.decodiff.harness.BadInputException("--html is not written for --engine llama.cpp yet; use the terminal or --json");
        var gguf = llama.resolveGguf(modelDir, false);
        int tokens = ref.manifest().step(ref.manifest().stepCount() - 1).start() + ref.manifest().step(ref.manifest().stepCount() - 1).length();
        var options = llama.options(engine, tokens);
        try {
            String candidate = dev.decodiff.llamacpp.LlamaCppRunner.describeRelease() + ": " + llama.describeSource(gguf, modelDir)
                    + " (" + dev.decodiff.llamacpp.ffi.LlamaContext.describe(options) + ")";
            var r = dev.decodiff.harness.bisect.LlamaCppLocalErrors.run(refDir, gguf, options, candidate, modelDir);
            output.deliver(spec, () -> dev.decodiff.harness.bisect.LlamaCppLocalErrors.json(r).toPrettyString(),
                    () -> dev.decodiff.harness.bisect.LlamaCppLocalErrors.terminal(r), () -> "");
            return r.diverges() ? Main.DIVERGENCE : Main.MATCH;
        } catch (dev.decodiff.llamacpp.ffi.LlamaCppException e) {
            throw new dev.decodiff.harness.BadInputException(e.getMessage(), e);
        }
    }
}
