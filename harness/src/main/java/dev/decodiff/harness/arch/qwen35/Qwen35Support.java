package dev.decodiff.harness.arch.qwen35;

import dev.decodiff.engine.arch.Architecture;
import dev.decodiff.engine.arch.LoadedModel;
import dev.decodiff.engine.qwen35.Qwen35Architecture;
import dev.decodiff.harness.arch.ArchitectureSupport;
import dev.decodiff.harness.compare.attribution.OpAttribution;

import java.nio.file.Path;

/** Qwen3.5's harness plug-in. */
public final class Qwen35Support implements ArchitectureSupport {
    public static final Qwen35Support INSTANCE = new Qwen35Support();

    private Qwen35Support() {}

    @Override public Architecture architecture() { return Qwen35Architecture.INSTANCE; }

    /** Qwen3.5's ops; with a GGUF, its stored matrices make ggml's matmuls a hypothesis (a llama.cpp candidate). */
    @Override
    public OpAttribution attribution(LoadedModel model, boolean everyCell, Path gguf) {
        var q = ((Qwen35Architecture.Loaded) model).model();
        return gguf == null ? new Qwen35Attribution(q, everyCell)
                : new Qwen35Attribution(q.ops().withStored(Qwen35StoredMatrices.of(gguf, q)), everyCell);
    }
}
