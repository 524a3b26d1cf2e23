package dev.decodiff.harness.arch.llama;

import dev.decodiff.engine.arch.Architecture;
import dev.decodiff.engine.arch.LoadedModel;
import dev.decodiff.engine.llama.LlamaArchitecture;
import dev.decodiff.harness.arch.ArchitectureSupport;
import dev.decodiff.harness.compare.attribution.OpAttribution;

import java.nio.file.Path;

/** The Llama family's harness plug-in (llama, mistral, qwen3): local attribution through its ops. */
public final class LlamaSupport implements ArchitectureSupport {
    public static final LlamaSupport INSTANCE = new LlamaSupport();

    private LlamaSupport() {}

    @Override public Architecture architecture() { return LlamaArchitecture.INSTANCE; }

    /** The family's ops recomputed from a side's own inputs; a GGUF's stored matrices are not modelled (uniform matmul inputs are). */
    @Override
    public OpAttribution attribution(LoadedModel model, boolean everyCell, Path gguf) {
        return new LlamaAttribution(((LlamaArchitecture.Loaded) model).model(), everyCell);
    }
}
