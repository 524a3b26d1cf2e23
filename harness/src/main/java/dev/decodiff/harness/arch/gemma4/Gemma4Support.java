package dev.decodiff.harness.arch.gemma4;

import dev.decodiff.engine.arch.Architecture;
import dev.decodiff.engine.arch.Gemma4Architecture;
import dev.decodiff.engine.arch.LoadedModel;
import dev.decodiff.harness.arch.ArchitectureSupport;
import dev.decodiff.harness.arch.BenchModel;
import dev.decodiff.harness.arch.CheckpointDescriber;
import dev.decodiff.harness.arch.EngineSelfTest;
import dev.decodiff.harness.arch.LlamaCppSelfChecks;
import dev.decodiff.harness.arch.gemma4.selftest.Gemma4SelfTest;
import dev.decodiff.harness.arch.OwnModel;
import dev.decodiff.harness.arch.PlanGeometryReader;
import dev.decodiff.harness.arch.SweepSupport;
import dev.decodiff.harness.arch.gemma4.sweep.Gemma4Sweep;
import dev.decodiff.harness.arch.TunableEngine;
import dev.decodiff.engine.Gemma4Config;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.engine.LayerType;
import dev.decodiff.harness.arch.gemma4.bisect.Bisector;
import dev.decodiff.harness.compare.CellStats;
import dev.decodiff.harness.compare.attribution.OpAttribution;
import dev.decodiff.harness.compare.detect.DetectorContext;
import dev.decodiff.harness.compare.detect.Detectors;
import dev.decodiff.harness.compare.detect.Finding;
import dev.decodiff.harness.compare.detect.ReferenceHistory;
import dev.decodiff.harness.dump.StepTensors;
import dev.decodiff.harness.selfcheck.LlamaCppSelfCheck;

import java.nio.file.Path;
import java.util.Optional;

/** Gemma 4's harness plug-in. */
public final class Gemma4Support implements ArchitectureSupport {
    public static final Gemma4Support INSTANCE = new Gemma4Support();

    private Gemma4Support() {}

    @Override public Architecture architecture() { return Gemma4Architecture.INSTANCE; }

    /** Gemma 4's ops ({@code Gemma4Ops}); llama.cpp's GGUF plays no part (the folder's own types are read). */
    @Override
    public OpAttribution attribution(LoadedModel model, boolean everyCell, Path gguf) {
        return new LocalAttribution(((Gemma4Architecture.Loaded) model).model(), everyCell);
    }

    /** Bisect's detectors (Gemma 4's ops recomputed under their variants) with the checkpoint's weights. */
    @Override
    public Finding explainCulprit(Path checkpoint, CellStats cell, StepTensors ref, StepTensors local, ReferenceHistory history) {
        try (var model = Gemma4Model.load(checkpoint)) {
            var ctx = new DetectorContext(cell, ref, local, DetectorContext.nearEqual(cell.tolerance()), Gemma4Architecture.INSTANCE.wrap(model), history);
            return Detectors.explain(Bisector.DETECTORS, ctx);
        }
    }

    @Override
    public int slidingWindow(LoadedModel model, int layer) {
        var cfg = Gemma4Engine.model(model).config();
        if (layer >= cfg.numLayers() || cfg.layer(layer).type() != LayerType.SLIDING) return 0;
        return cfg.slidingWindow();
    }

    @Override
    public Optional<TunableEngine> tunableEngine() { return Optional.of(Gemma4Engine.INSTANCE); }

    @Override
    public Optional<PlanGeometryReader> planGeometry() { return Optional.of(Gemma4PlanGeometry.INSTANCE); }

    /** Its whole catalog on its own engine: compare, bisect's variants, selfcheck ({@link Gemma4SelfTest}). */
    @Override
    public Optional<EngineSelfTest> engineSelfTest() {
        return Optional.of((checkpoint, cases, profile, progress) -> new Gemma4SelfTest(profile).checkpoint(checkpoint, cases, progress));
    }

    @Override
    public Optional<BenchModel.Loader> benchModel() { return Optional.of(Gemma4BenchModel::load); }

    /** Tests written before the seam take a {@link Gemma4Model} as their checkpoint. */
    @Override
    public Optional<OwnModel<?>> ownModel() { return Optional.of(new OwnModel<>(Gemma4Model.class, Gemma4Engine::model)); }

    @Override
    public Optional<CheckpointDescriber> checkpointDescriber() { return Optional.of(Gemma4Description.INSTANCE); }

    @Override
    public Optional<SweepSupport> sweep() { return Optional.of(Gemma4Sweep.INSTANCE); }

    /** The sliding-window checks: decode vs prefill, chunked prefill around the window, capture vs none. */
    @Override
    public Optional<LlamaCppSelfChecks> llamaCppSelfChecks() {
        return Optional.of(dir -> {
            var config = Gemma4Config.read(dir.resolve("config.json"));
            int window = config.slidingWindow();
            return new LlamaCppSelfChecks.Planned(LlamaCppSelfCheck.defaultTokenCount(window), window,
                    (gguf, options) -> new LlamaCppSelfCheck(gguf, options, window, config.vocabSize()));
        });
    }
}
