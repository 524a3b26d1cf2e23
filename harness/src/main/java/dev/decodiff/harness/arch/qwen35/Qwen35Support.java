package dev.decodiff.harness.arch.qwen35;

import dev.decodiff.engine.arch.Architecture;
import dev.decodiff.engine.arch.LoadedModel;
import dev.decodiff.engine.qwen35.Qwen35Architecture;
import dev.decodiff.engine.qwen35.Qwen35Config;
import dev.decodiff.engine.qwen35.Qwen35Fault;
import dev.decodiff.harness.arch.ArchitectureSupport;
import dev.decodiff.harness.arch.BenchModel;
import dev.decodiff.harness.arch.CatalogExpectations;
import dev.decodiff.harness.dump.DumpManifest;
import dev.decodiff.harness.selftest.ExpectedCell;
import dev.decodiff.harness.arch.LlamaCppSelfChecks;
import dev.decodiff.harness.compare.attribution.OpAttribution;
import dev.decodiff.harness.selfcheck.LlamaCppSelfCheck;

import java.nio.file.Path;
import java.util.Optional;

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

    /** Where selftest must find each catalog fault: {@link Qwen35Expectations} on the model's config. */
    @Override
    public Optional<CatalogExpectations> catalogExpectations() {
        return Optional.of(new CatalogExpectations() {
            @Override
            public ExpectedCell of(LoadedModel model, String faultId, DumpManifest m) {
                return Qwen35Expectations.of(Qwen35Fault.byId(faultId), ((Qwen35Architecture.Loaded) model).model().config(), m);
            }

            @Override
            public String rule(String faultId) { return Qwen35Fault.byId(faultId).expected().toString(); }

            @Override
            public String key() { return "qwen35"; }
        });
    }

    /** Its bench's view: the streamed weights, their placement, the linear-attention mixer's time per step. */
    @Override
    public Optional<BenchModel.Loader> benchModel() { return Optional.of(Qwen35BenchModel::load); }

    /** The conv and recurrent states handed over along every split (state audit, decode, calls, ubatches). */
    @Override
    public Optional<LlamaCppSelfChecks> llamaCppSelfChecks() {
        return Optional.of(dir -> {
            var config = Qwen35Config.read(dir.resolve("config.json"));
            return new LlamaCppSelfChecks.Planned(LlamaCppSelfCheck.QWEN35_PROMPT + LlamaCppSelfCheck.QWEN35_DECODE, 0,
                    (gguf, options) -> LlamaCppSelfCheck.qwen35(gguf, options, config.vocabSize()));
        });
    }
}
