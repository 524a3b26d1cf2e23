package dev.decodiff.harness.arch.llama;

import dev.decodiff.engine.arch.Architecture;
import dev.decodiff.engine.arch.LoadedModel;
import dev.decodiff.engine.llama.LlamaArchitecture;
import dev.decodiff.engine.llama.LlamaConfig;
import dev.decodiff.engine.llama.LlamaFault;
import dev.decodiff.engine.llama.LlamaModel;
import dev.decodiff.engine.ops.StoredMatrices;
import dev.decodiff.harness.llamacpp.GgufStoredTensors;
import dev.decodiff.harness.arch.CatalogExpectations;
import dev.decodiff.harness.dump.DumpManifest;
import dev.decodiff.harness.selftest.ExpectedCell;
import dev.decodiff.harness.arch.LlamaCppSelfChecks;
import dev.decodiff.harness.selfcheck.LlamaCppSelfCheck;
import dev.decodiff.harness.arch.ArchitectureSupport;
import dev.decodiff.harness.compare.attribution.OpAttribution;

import java.nio.file.Path;
import java.util.Optional;

/**
 * The Llama family's harness plug-in (llama, mistral, qwen3): local attribution through its ops, its catalog's
 * expected cells for selftest, llama.cpp's self-checks.
 */
public final class LlamaSupport implements ArchitectureSupport {
    public static final LlamaSupport INSTANCE = new LlamaSupport();

    private LlamaSupport() {}

    @Override public Architecture architecture() { return LlamaArchitecture.INSTANCE; }

    /**
     * The family's ops recomputed from a side's own inputs; with a GGUF, its stored matrices (each checked to be the
     * checkpoint's within its type's rounding) make ggml's matmuls on them a hypothesis (a llama.cpp candidate).
     */
    @Override
    public OpAttribution attribution(LoadedModel model, boolean everyCell, Path gguf) {
        var m = ((LlamaArchitecture.Loaded) model).model();
        return gguf == null ? new LlamaAttribution(m, everyCell) : new LlamaAttribution(m.ops().withStored(storedMatrices(gguf, m)), everyCell);
    }

    /**
     * Which of the family's matrices each checkpoint tensor the GGUF stores is ({@link GgufStoredTensors} reads them
     * back, checks each against the checkpoint and undoes llama's q/k head permutation): the embedding (looked up by
     * get_rows, and the output matrix where the head is tied), the head, every layer's projections. Biases and norms
     * stay F32 in a GGUF: the checkpoint's.
     */
    private static StoredMatrices storedMatrices(Path gguf, LlamaModel model) {
        var w = model.weights();
        var s = GgufStoredTensors.read(gguf, model.directory()).bindEmbeddingAndHead(w.embed(), w.lmHead());
        for (int i = 0; i < w.layers().size(); i++) {
            var l = w.layers().get(i);
            String a = "layers." + i + ".self_attn.", m = "layers." + i + ".mlp.";
            s.bind(a + "q_proj.weight", l.q()).bind(a + "k_proj.weight", l.k()).bind(a + "v_proj.weight", l.v()).bind(a + "o_proj.weight", l.o())
                    .bind(m + "gate_proj.weight", l.gate()).bind(m + "up_proj.weight", l.up()).bind(m + "down_proj.weight", l.down());
        }
        return s.matrices();
    }

    /** Where selftest must find each catalog fault: {@link LlamaExpectations} on the model's config. */
    @Override
    public Optional<CatalogExpectations> catalogExpectations() {
        return Optional.of(new CatalogExpectations() {
            @Override
            public ExpectedCell of(LoadedModel model, String faultId, DumpManifest m) {
                return LlamaExpectations.of(LlamaFault.byId(faultId), ((LlamaArchitecture.Loaded) model).model().config(), m);
            }

            @Override
            public String rule(String faultId) { return LlamaFault.byId(faultId).expected().toString(); }

            @Override
            public String key() { return "llama"; }
        });
    }

    /** Full attention without a window or a recurrent state: decode vs prefill, chunked prefill, capture vs none. */
    @Override
    public Optional<LlamaCppSelfChecks> llamaCppSelfChecks() {
        return Optional.of(dir -> {
            var config = LlamaConfig.read(dir.resolve("config.json"));
            return new LlamaCppSelfChecks.Planned(LlamaCppSelfCheck.DENSE_PROMPT + LlamaCppSelfCheck.DENSE_DECODE, 0,
                    (gguf, options) -> LlamaCppSelfCheck.dense(gguf, options, config.vocabSize()));
        });
    }
}
