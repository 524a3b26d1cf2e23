package dev.decodiff.harness.arch.gemma4;

import dev.decodiff.engine.arch.Architecture;
import dev.decodiff.engine.arch.Gemma4Architecture;
import dev.decodiff.engine.arch.LoadedModel;
import dev.decodiff.harness.arch.ArchitectureSupport;
import dev.decodiff.harness.compare.attribution.OpAttribution;

import java.nio.file.Path;

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
}
