package dev.decodiff.harness.cli;

import dev.decodiff.harness.OutputPaths;
import dev.decodiff.harness.bisect.BisectReport;
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
                "variant by name — only when the runner-up is at least 10x further from the candidate; else \"two explanations fit\".",
                "On Qwen3.5 and the Llama family it names the bug through the fault catalog: each catalog fault replayed alone on the reference's tokens, the one that",
                "reproduces the candidate at its first divergent cell named (10x margin), and proved by writing the reference's tensor into the engine there."},
        footer = {"", "Exit codes: 0 no divergence, 1 divergence bisected, 2 bad input or usage.",
                "Examples:",
                "  decodiff bisect --fault k-eq-v-rotated-keys",
                "  decodiff bisect reference-dumps/gemma4-tiny/short --fault ring-wrap --json",
                "  decodiff bisect reference-dumps/gemma4-tiny-ple/long --fault kv-shared-first-source --html bisect.html",
                "  decodiff bisect reference-dumps/qwen35-tiny/long --fault state-stale",
                "  decodiff bisect reference-dumps/qwen35-tiny/short my-dump --json",
                "  decodiff bisect reference-dumps/llama-tiny/short --fault kv-heads-tiled"})
final class BisectCommand implements Callable<Integer> {
    @Mixin
    ReferenceArgs referenceArgs = new ReferenceArgs();

    @Mixin
    EngineFlags engine = new EngineFlags();

    @Mixin
    OutputArgs output = new OutputArgs();

    @Mixin
    LlamaCppFlags llama = new LlamaCppFlags();

    @picocli.CommandLine.Parameters(index = "1", arity = "0..1", paramLabel = "CANDIDATE",
            description = "A candidate dump to bisect instead of the live engine (an architecture with a fault catalog: Qwen3.5, the Llama family): the fault that reproduces it is named by replay, and the substitutions run in that fault's engine.")
    Path candidate;

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
        if (llama.isLlamaCpp()) {
            if (candidate != null) throw new dev.decodiff.harness.BadInputException("CANDIDATE and --engine llama.cpp contradict each other; give one");
            return llamaCpp(refDir, ref, modelDir);
        }
        var arch = dev.decodiff.engine.arch.Architectures.of(modelDir);
        var tunable = dev.decodiff.harness.arch.ArchitectureSupports.of(arch).tunableEngine();
        if (tunable.isEmpty()) return catalog(ref, profile, modelDir, arch);
        if (candidate != null)
            throw new dev.decodiff.harness.BadInputException("bisect runs Gemma 4's engine live (it feeds the reference's tensors into it); drop CANDIDATE, or use compare for a dump");
        var options = engine.options();
        try (var m = tunable.get().load(modelDir)) {
            var result = tunable.get().bisect(m, options, ref, profile);
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
     * An architecture with a fault catalog (Qwen3.5, the Llama family): the first divergent cell named by replaying each catalog fault,
     * and proved by writing the reference's tensors into the engine.
     */
    private int catalog(dev.decodiff.harness.dump.DumpReader ref, dev.decodiff.harness.compare.ToleranceProfile profile, Path modelDir,
                        dev.decodiff.engine.arch.Architecture arch) {
        if (output.html != null) throw new dev.decodiff.harness.BadInputException("--html is written for Gemma 4's bisect only; use the terminal or --json for " + arch.name());
        if (!engine.onlyFaults()) throw new dev.decodiff.harness.BadInputException("--kv-cache and --matmul apply to Gemma 4's engine; drop them for " + modelDir);
        var faults = engine.faultIds(arch, modelDir);
        if (candidate != null && !faults.isEmpty())
            throw new dev.decodiff.harness.BadInputException("--fault applies to a live run; drop it, or drop CANDIDATE to run the engine");
        try (var m = dev.decodiff.engine.arch.Architectures.load(modelDir)) {
            var bisector = new dev.decodiff.harness.bisect.CatalogBisector(m, ref, profile);
            dev.decodiff.harness.bisect.BisectResult result;
            if (candidate == null) result = bisector.runLive(faults);
            else {
                var cand = dev.decodiff.harness.dump.DumpReader.openCandidate(candidate);
                var notes = dev.decodiff.harness.compare.Comparison.checkIdentity(ref.manifest(), ref.manifestFile(), cand.manifest(), cand.manifestFile(),
                        referenceArgs.allowMismatch());
                var cmp = dev.decodiff.harness.compare.Comparison.run(ref, dev.decodiff.harness.compare.Comparison.dumpSource(cand),
                        new dev.decodiff.harness.compare.Comparison.Options(profile, referenceArgs.allowMismatch(), null), notes);
                result = bisector.bisectDump(cmp, cand);
            }
            var r = result;
            output.deliver(spec, () -> BisectReport.json(r), () -> BisectReport.terminal(r, Terminal.colourStdout()), () -> "");
            return r.exitCode();
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
