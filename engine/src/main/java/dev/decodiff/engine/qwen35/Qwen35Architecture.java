package dev.decodiff.engine.qwen35;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.Probe;
import dev.decodiff.engine.arch.Architecture;
import dev.decodiff.engine.arch.LoadedModel;
import dev.decodiff.engine.arch.ModelSession;

import java.nio.file.Path;
import java.util.List;

/** Qwen3.5 (qwen3_5_text, qwen3_5_moe_text): Gated DeltaNet and gated full attention, dense or MoE, in fp32. */
public final class Qwen35Architecture implements Architecture {
    public static final Qwen35Architecture INSTANCE = new Qwen35Architecture();

    /** Points of a Gated DeltaNet layer, in causal order. */
    static final List<String> LINEAR_POINTS = List.of(CapturePoints.LINEAR_CONV_STATE_READ, CapturePoints.LINEAR_STATE_READ,
            CapturePoints.LINEAR_CONV_STATE, CapturePoints.LINEAR_Q, CapturePoints.LINEAR_K, CapturePoints.LINEAR_V,
            CapturePoints.LINEAR_BETA, CapturePoints.LINEAR_DECAY, CapturePoints.LINEAR_CORE_OUT, CapturePoints.LINEAR_STATE,
            CapturePoints.LINEAR_OUT);
    /** Points of a gated full-attention layer, in causal order. */
    static final List<String> FULL_POINTS = List.of(CapturePoints.Q, CapturePoints.ATTN_GATE, CapturePoints.K, CapturePoints.V,
            CapturePoints.K_READ, CapturePoints.V_READ, CapturePoints.ATTN_OUT);

    private Qwen35Architecture() {}

    @Override public String name() { return "Qwen3.5"; }

    @Override public List<String> modelTypes() { return List.of(Qwen35Config.DENSE, Qwen35Config.MOE); }

    /**
     * Loads for the harness's runs (dumps, compares, sweeps), which decode a few steps: the weights stay in the file
     * mapping, as Gemma 4's do for such runs (the huge-page copy pays only over a long decode; see WeightResidency).
     */
    @Override public LoadedModel load(Path dir) { return new Loaded(Qwen35Model.load(dir, 0)); }

    @Override
    public List<String> layerPointKinds() {
        var out = new java.util.ArrayList<String>(LINEAR_POINTS);
        out.addAll(FULL_POINTS);
        out.addAll(List.of(CapturePoints.MLP_OUT, CapturePoints.MOE_OUT, CapturePoints.OUT));
        return out;
    }

    @Override
    public List<String> faultNames() { return java.util.Arrays.stream(Qwen35Fault.values()).map(Qwen35Fault::id).toList(); }

    @Override
    public String faultDescription(String id) { return Qwen35Fault.byId(id).description(); }

    /** A loaded Qwen3.5 model behind the plug-in seam. */
    public record Loaded(Qwen35Model model) implements LoadedModel {
        @Override public Architecture architecture() { return INSTANCE; }
        @Override public Path directory() { return model.directory(); }
        @Override public String modelType() { return model.config().modelType(); }
        @Override public int numLayers() { return model.config().numLayers(); }
        @Override public int vocabSize() { return model.config().vocabSize(); }
        @Override public int maxPositions() { return model.config().maxPositions(); }

        @Override
        public List<String> layerPoints(int layer) {
            var out = new java.util.ArrayList<String>(model.config().mixer(layer) == Qwen35Config.Mixer.LINEAR ? LINEAR_POINTS : FULL_POINTS);
            out.add(model.config().moe() ? CapturePoints.MOE_OUT : CapturePoints.MLP_OUT);
            out.add(CapturePoints.OUT);
            return out;
        }

        @Override public ModelSession newSession(Probe probe) { return model.newSession(probe); }

        @Override
        public ModelSession newSession(Probe probe, java.util.Collection<String> faults) {
            return model.newSession(probe, Qwen35Fault.byIds(faults));
        }
        @Override public String configSha256() { return model.configSha256(); }
        @Override public String weightsSha256() { return model.weightsSha256(); }
        @Override public void close() { model.close(); }
    }
}
