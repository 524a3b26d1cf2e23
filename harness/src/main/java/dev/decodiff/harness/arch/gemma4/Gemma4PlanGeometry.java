package dev.decodiff.harness.arch.gemma4;

import dev.decodiff.engine.Gemma4Config;
import dev.decodiff.harness.arch.PlanGeometryReader;
import dev.decodiff.harness.plan.PlanGeometry;

import java.nio.file.Path;

/** Gemma 4's config as the plan sizes it: sliding and full layers, KV sharing, k_eq_v, per-layer inputs, MoE. */
final class Gemma4PlanGeometry implements PlanGeometryReader {
    static final Gemma4PlanGeometry INSTANCE = new Gemma4PlanGeometry();

    private Gemma4PlanGeometry() {}

    /** gemma4 (the multimodal wrapper) and gemma4_text; any other gemma4 type is refused by the reader in its own words. */
    @Override
    public boolean reads(String modelType) { return modelType.startsWith("gemma4"); }

    @Override
    public PlanGeometry read(Path file) {
        var cfg = Gemma4Config.read(file);
        return new PlanGeometry("gemma4_text", cfg.hidden(), cfg.numHeads(), cfg.vocabSize(), cfg.slidingWindow(), cfg.pleDim(), cfg.moe(),
                cfg.layers());
    }
}
