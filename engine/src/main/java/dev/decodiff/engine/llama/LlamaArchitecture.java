package dev.decodiff.engine.llama;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.Probe;
import dev.decodiff.engine.arch.Architecture;
import dev.decodiff.engine.arch.LoadedModel;
import dev.decodiff.engine.arch.ModelSession;

import java.nio.file.Path;
import java.util.List;

/** The Llama family (llama, mistral, qwen3): dense decoders with GQA attention and a SwiGLU MLP, in fp32. */
public final class LlamaArchitecture implements Architecture {
    public static final LlamaArchitecture INSTANCE = new LlamaArchitecture();

    /** Every layer's points, in causal order. */
    static final List<String> LAYER_POINTS = List.of(CapturePoints.Q, CapturePoints.K, CapturePoints.V,
            CapturePoints.K_READ, CapturePoints.V_READ, CapturePoints.ATTN_OUT, CapturePoints.MLP_OUT, CapturePoints.OUT);

    private LlamaArchitecture() {}

    @Override public String name() { return "Llama family"; }

    @Override public List<String> modelTypes() { return LlamaConfig.MODEL_TYPES; }

    @Override public LoadedModel load(Path dir) { return new Loaded(LlamaModel.load(dir)); }

    @Override public List<String> layerPointKinds() { return LAYER_POINTS; }

    @Override public List<String> faultNames() { return java.util.Arrays.stream(LlamaFault.values()).map(LlamaFault::id).toList(); }

    @Override public String faultDescription(String id) { return LlamaFault.byId(id).description(); }

    /** A loaded Llama-family model behind the plug-in seam. */
    public record Loaded(LlamaModel model) implements LoadedModel {
        @Override public Architecture architecture() { return INSTANCE; }
        @Override public Path directory() { return model.directory(); }
        @Override public String modelType() { return model.config().modelType(); }
        @Override public int numLayers() { return model.config().numLayers(); }
        @Override public int vocabSize() { return model.config().vocabSize(); }
        @Override public int maxPositions() { return model.config().maxPositions(); }
        @Override public List<String> layerPoints(int layer) { return LAYER_POINTS; }
        @Override public ModelSession newSession(Probe probe) { return model.newSession(probe); }

        @Override
        public ModelSession newSession(Probe probe, java.util.Collection<String> faults) {
            return model.newSession(probe, LlamaFault.byIds(faults));
        }
        @Override public String configSha256() { return model.configSha256(); }
        @Override public String weightsSha256() { return model.weightsSha256(); }
        @Override public void close() { model.close(); }
    }
}
