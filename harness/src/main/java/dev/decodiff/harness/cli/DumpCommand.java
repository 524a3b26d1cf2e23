package dev.decodiff.harness.cli;

import dev.decodiff.harness.OutputPaths;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.arch.Architectures;
import dev.decodiff.engine.arch.LoadedModel;
import dev.decodiff.harness.arch.ArchitectureSupports;
import dev.decodiff.harness.arch.TunableEngine;
import dev.decodiff.engine.Sampler;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.compare.EngineThrewException;
import dev.decodiff.harness.dump.DumpManifest;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.dump.DumpWriter;
import dev.decodiff.harness.dump.CapturedTensor;
import dev.decodiff.harness.dump.PointSelection;
import dev.decodiff.harness.live.DumpRecorder;
import dev.decodiff.harness.live.EngineSetup;
import dev.decodiff.llamacpp.LlamaCppRunner;
import dev.decodiff.llamacpp.ffi.LlamaCppException;
import dev.decodiff.harness.live.LiveStep;
import dev.decodiff.harness.live.ModelLocator;
import dev.decodiff.harness.report.ProgressBar;
import picocli.CommandLine.ArgGroup;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.function.Predicate;

@Command(name = "dump", mixinStandardHelpOptions = true,
        description = {"Runs the engine and writes a dump v1 (manifest.json + one safetensors file per step), step by step.",
                "With --reference it is teacher-forced on that dump's tokens and records the points the reference has;",
                "with --prompt/--tokens it decodes greedily for -n steps and records every point (or --points)."},
        footer = {"", "Examples:",
                "  decodiff dump --model checkpoints/gemma4-tiny --reference reference-dumps/gemma4-tiny/long --out out/mine",
                "  decodiff dump --engine llama.cpp --model checkpoints/gemma4-tiny --reference reference-dumps/gemma4-tiny/long --out out/llama"})
final class DumpCommand implements Callable<Integer> {
    @Option(names = "--model", required = true, paramLabel = "DIR", description = "Checkpoint folder (config.json + *.safetensors), or a Gemma 4 .gguf file: the engine runs its weights dequantized as ggml does (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K; converted once into a cached float32 folder).")
    Path model;

    @Option(names = "--out", required = true, paramLabel = "DIR", description = "Output folder (new or empty; see --force).")
    Path out;

    @ArgGroup(exclusive = true, multiplicity = "1")
    Source source;

    static final class Source {
        @Option(names = "--reference", paramLabel = "DUMP", description = "Teacher-force on this dump's tokens and steps.")
        Path reference;

        @Option(names = "--prompt", paramLabel = "TEXT", description = "Prompt text (encoded with the checkpoint's tokenizer, with <bos>).")
        String prompt;

        @Option(names = "--tokens", paramLabel = "IDS", split = ",", description = "Prompt token ids, comma-separated.")
        int[] tokens;
    }

    @Option(names = {"-n", "--steps"}, paramLabel = "N",
            description = "Steps to record: with --prompt/--tokens, the prefill and N−1 decode steps (N new tokens; default 16); with --reference, at most N of its steps (fewer than the reference has: compare says incomplete, exit 3).")
    Integer steps;

    @Option(names = "--points", paramLabel = "GLOB", split = ",",
            description = "Record only points matching these globs (e.g. 'layers.5.*,logits'); '*' matches dots too. The manifest records the selection, so compare counts the points left out as excluded by choice, not missing.")
    List<String> points;

    @Option(names = "--force", description = "Replace the dump in a non-empty --out folder.")
    boolean force;

    @Option(names = "--allow-mismatch", description = "With --reference: run even if --model is not the reference's checkpoint.")
    boolean allowMismatch;

    @picocli.CommandLine.Mixin
    EngineFlags engine = new EngineFlags();

    @picocli.CommandLine.Mixin
    MaxPositions maxPositions = new MaxPositions();

    @picocli.CommandLine.Mixin
    LlamaCppFlags llamaCpp = new LlamaCppFlags();

    @picocli.CommandLine.Spec
    picocli.CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() {
        if (steps != null && steps < 1) throw new BadInputException("-n must be ≥ 1, got " + steps);
        OutputPaths.refuseOverlap("--out", out, OutputPaths.withBundledData(model, source.reference));
        Predicate<String> globs = p -> true;
        List<String> selected = null;
        if (points != null && !points.isEmpty()) {
            var sel = PointSelection.of(points);
            if (sel.globs().isEmpty()) throw new BadInputException("--points names no glob; leave it out to record every point");
            globs = sel;
            selected = sel.globs();
        }
        boolean viaLlamaCpp = llamaCpp.isLlamaCpp();
        // A GGUF's weights, dequantized as ggml does, in a float32 checkpoint folder converted once (cached)
        if (!viaLlamaCpp && dev.decodiff.harness.llamacpp.GgufCheckpointCache.isGguf(model))
            model = dev.decodiff.harness.llamacpp.GgufCheckpointCache.of(model);
        DumpReader ref = source.reference != null ? DumpReader.open(source.reference) : null;
        if (ref != null) ModelLocator.check(model, ModelLocator.identity(model), ref.manifest(), ref.manifestFile(), allowMismatch);
        int[] prompt = ref != null ? null : promptIds();
        // Teacher-forced on a reference that is itself a selection: the dump holds at most that selection, so it
        // records it (unless the user chose their own), or it would look as if whole layers went missing.
        if (selected == null && ref != null && ref.manifest().selectedPoints() != null) selected = ref.manifest().selectedPoints();
        if (viaLlamaCpp) return dumpLlamaCpp(globs, selected, ref, prompt);
        var tunable = ArchitectureSupports.of(Architectures.of(model)).tunableEngine();
        if (tunable.isEmpty()) return dumpArchitecture(globs, selected, ref, prompt);
        var options = engine.options();
        try (var m = tunable.get().load(model, stepsToRun(ref) - 1L)) { // each step after the prompt's decodes a token
            return dump(tunable.get(), m, globs, selected, options, ref, prompt);
        } catch (EngineThrewException e) {
            var err = spec.commandLine().getErr();
            int s = e.failure().step();
            err.println("decodiff: " + e.failure().sentence() + "; " + out + " keeps the " + s + (s == 1 ? " step" : " steps")
                    + " before it, not marked complete");
            err.flush();
            return Main.DIVERGENCE;
        }
    }

    /** Another architecture's engine through the plug-in seam (exact fp32; Gemma 4's engine flags do not apply). */
    private int dumpArchitecture(Predicate<String> globs, List<String> selected, DumpReader ref, int[] prompt) {
        if (!engine.onlyFaults())
            throw new BadInputException("--kv-cache and --matmul apply to Gemma 4's engine; drop them for " + model);
        var faults = engine.faultIds(Architectures.of(model), model);
        try (var m = Architectures.load(model)) {
            var modelInfo = new DumpManifest.Model(m.modelType(), m.numLayers(), m.configSha256(), m.weightsSha256());
            var producer = EngineSetup.producer(faults, spec.commandLine().getParseResult().originalArgs());
            checkSelection(globs, ref != null ? ref.allPoints() : new java.util.LinkedHashSet<>(m.pointNames()));
            int n = stepsToRun(ref);
            DumpWriter w;
            if (ref != null) {
                Set<String> refPoints = ref.allPoints();
                Predicate<String> g = globs;
                var rm = ref.manifest();
                w = DumpWriter.create(out, force, producer, modelInfo, rm.tokens(), rm.promptLength(), selected);
                try (var bar = new ProgressBar("dumping", n)) {
                    new DumpRecorder(m, faults, p -> refPoints.contains(p) && g.test(p), w, this::noPointMatched).teacherForced(rm, n, bar::update);
                }
            } else {
                maxPositions.check(model.resolve("config.json"), m.maxPositions(), (long) prompt.length + n - 1,
                        "the prompt (" + prompt.length + " tokens) and -n " + n, "lower -n");
                w = DumpWriter.create(out, force, producer, modelInfo, Arrays.stream(prompt).boxed().toList(), prompt.length, selected);
                try (var bar = new ProgressBar("dumping", n)) {
                    new DumpRecorder(m, faults, globs, w, this::noPointMatched).greedy(prompt, n, bar::update);
                }
            }
            w.finish();
            var err = spec.commandLine().getErr();
            err.println("decodiff: wrote " + w.stepsWritten() + " steps to " + out);
            err.flush();
            return Main.MATCH;
        } catch (EngineThrewException e) {
            var err = spec.commandLine().getErr();
            err.println("decodiff: " + e.failure().sentence() + "; " + out + " keeps the steps before it, not marked complete");
            err.flush();
            return Main.DIVERGENCE;
        }
    }

    /** Writes the dump; an engine that throws ends it with the steps written so far (not marked complete). */
    private int dump(TunableEngine tunable, LoadedModel m, Predicate<String> globs, List<String> selected, dev.decodiff.engine.EngineOptions options,
                     DumpReader ref, int[] prompt) {
        tunable.checkFits(m, options);
        var modelInfo = new DumpManifest.Model(modelType(model), m.numLayers(), m.configSha256(), m.weightsSha256());
        var producer = tunable.producer(m, options, spec.commandLine().getParseResult().originalArgs());
        checkSelection(globs, ref != null ? ref.allPoints() : contractNames(m.numLayers()));
        DumpWriter w;
        if (ref != null) {
            Set<String> refPoints = ref.allPoints();
            Predicate<String> g = globs;
            var rm = ref.manifest();
            int n = stepsToRun(ref);
            w = DumpWriter.create(out, force, producer, modelInfo, rm.tokens(), rm.promptLength(), selected);
            try (var bar = new ProgressBar("dumping", n)) {
                new DumpRecorder(probe -> tunable.session(m, options, probe), p -> refPoints.contains(p) && g.test(p), w, this::noPointMatched)
                        .teacherForced(rm, n, bar::update);
            }
        } else {
            int n = stepsToRun(null);
            maxPositions.check(model.resolve("config.json"), m.maxPositions(), (long) prompt.length + n - 1,
                    "the prompt (" + prompt.length + " tokens) and -n " + n, "lower -n");
            w = DumpWriter.create(out, force, producer, modelInfo, Arrays.stream(prompt).boxed().toList(), prompt.length, selected);
            try (var bar = new ProgressBar("dumping", n)) {
                new DumpRecorder(probe -> tunable.session(m, options, probe), globs, w, this::noPointMatched).greedy(prompt, n, bar::update);
            }
        }
        w.finish();
        var err = spec.commandLine().getErr();
        err.println("decodiff: wrote " + w.stepsWritten() + " steps to " + out);
        err.flush();
        return Main.MATCH;
    }

    /** Refuses a --points selection that matches none of the points there are, before any file is written. */
    private void checkSelection(Predicate<String> globs, Set<String> possible) {
        if (points != null && possible.stream().noneMatch(globs)) throw noPointMatched();
    }

    private BadInputException noPointMatched() {
        return new BadInputException("--points " + String.join(",", points == null ? List.of() : points)
                + " matches no capture point" + (source.reference != null ? " the reference holds" : "")
                + "; see docs/dump-format.md for the names (e.g. 'layers.5.*,logits')");
    }

    /** Steps the dump records: -n, at most the reference's when teacher-forced on one, else 16 (or all the reference's). */
    private int stepsToRun(DumpReader ref) {
        if (ref != null) return steps == null ? ref.stepCount() : Math.min(steps, ref.stepCount());
        return steps == null ? 16 : steps;
    }

    /** Every contract point name of a model with this many layers (a superset of what the engine records). */
    private static Set<String> contractNames(int layers) {
        var names = new java.util.LinkedHashSet<String>(List.of(CapturePoints.EMBED, CapturePoints.PLE, CapturePoints.FINAL_NORM, CapturePoints.LOGITS));
        for (int l = 0; l < layers; l++) for (String s : CapturePoints.LAYER_SUFFIXES) names.add(CapturePoints.layer(l, s));
        return names;
    }

    /** The same dump, produced by llama.cpp on the checkpoint's GGUF (producer "llama.cpp", its release). */
    private Integer dumpLlamaCpp(Predicate<String> globs, List<String> selected, DumpReader ref, int[] prompt) {
        var id = ModelLocator.identity(model);
        int n = stepsToRun(ref);
        int total = ref != null ? ref.manifest().tokens().size() : prompt.length + n;
        var options = llamaCpp.options(engine, total);
        Path gguf = llamaCpp.resolveGguf(model, allowMismatch);
        Set<String> refPoints = ref != null ? ref.allPoints() : Set.of();
        Predicate<String> wanted = ref != null ? p -> refPoints.contains(p) && globs.test(p) : globs;
        DumpWriter w;
        try (var r = LlamaCppRunner.open(gguf, options, wanted)) {
            var modelInfo = new DumpManifest.Model(modelType(model), r.model().layerCount(), id.configSha256(), id.weightsSha256());
            var producer = LlamaCppFlags.producer(r.model().weightDtype(), options, spec.commandLine().getParseResult().originalArgs());
            checkSelection(globs, ref != null ? ref.allPoints() : contractNames(r.model().layerCount()));
            var tokens = new ArrayList<Integer>();
            if (ref != null) tokens.addAll(ref.manifest().tokens());
            else for (int t : prompt) tokens.add(t);
            w = DumpWriter.create(out, force, producer, modelInfo, tokens, ref != null ? ref.manifest().promptLength() : prompt.length, selected);
            int[] feed = prompt;
            int start = 0;
            try (var bar = new ProgressBar("dumping (llama.cpp)", n)) {
                for (int s = 0; s < n; s++) {
                    if (ref != null) {
                        feed = ref.manifest().stepTokens(s);
                        start = ref.manifest().step(s).start();
                    }
                    var step = r.step(feed, start, ref != null ? ref.points(s) : Set.of());
                    int next = Sampler.argmax(step.logits());
                    if (ref == null) {
                        tokens.add(next);
                        w.setTokens(tokens);
                    }
                    var captured = new ArrayList<CapturedTensor>();
                    for (var c : step.tensors().values())
                        if (!(start == 0 && dev.decodiff.harness.llamacpp.LlamaCppCandidate.freshStateRead(c)))
                            captured.add(CapturedTensor.of(c.point(), c.shape(), c.data()));
                    if (captured.isEmpty()) throw noPointMatched();
                    w.writeStep(start, feed.length, captured, next, LiveStep.top2Margin(step.logits()));
                    if (!step.notCaptured().isEmpty())
                        spec.commandLine().getErr().println("decodiff: step " + s + ": not captured from llama.cpp: " + step.notCaptured());
                    start += feed.length;
                    feed = new int[]{next};
                    bar.update(s + 1);
                }
            }
            w.finish();
        } catch (LlamaCppException e) {
            throw new BadInputException(e.getMessage(), e);
        }
        var err = spec.commandLine().getErr();
        err.println("decodiff: wrote " + w.stepsWritten() + " steps (llama.cpp) to " + out);
        err.flush();
        return Main.MATCH;
    }

    private int[] promptIds() {
        var ti = new TokenInput();
        ti.prompt = source.prompt;
        ti.tokens = source.tokens;
        return ti.resolve(model, false);
    }

    /** model_type as the manifest records it: the text model's ("gemma4_text"), also inside a multimodal config. */
    static String modelType(Path dir) {
        try {
            var root = new ObjectMapper().readTree(Files.readString(dir.resolve("config.json")));
            var tc = root.get("text_config");
            if (tc != null && tc.has("model_type") && !"gemma4_text".equals(root.path("model_type").asText()))
                return tc.get("model_type").asText();
            return root.path("model_type").asText("gemma4_text");
        } catch (IOException e) {
            throw new BadInputException(dir.resolve("config.json"), "cannot read: " + e.getMessage());
        }
    }

}
