package dev.decodiff.engine.arch;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.Fault;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.engine.InferenceSession;
import dev.decodiff.engine.KvSnapshot;
import dev.decodiff.engine.Probe;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/** Gemma 4 (gemma4_text) behind the plug-in seam: {@link Gemma4Model} and {@link InferenceSession}, unchanged. */
public final class Gemma4Architecture implements Architecture {
    public static final Gemma4Architecture INSTANCE = new Gemma4Architecture();

    private Gemma4Architecture() {}

    @Override public String name() { return "Gemma 4"; }

    @Override public List<String> modelTypes() { return List.of("gemma4_text"); }

    @Override public LoadedModel load(Path dir) { return new Loaded(Gemma4Model.load(dir)); }

    /** Wraps an already loaded Gemma 4 model (the harness's Gemma-specific commands load it themselves). */
    public LoadedModel wrap(Gemma4Model model) { return new Loaded(model); }

    /** An existing Gemma 4 session (with its own options: faults, KV types) seen through the seam. */
    public static ModelSession session(InferenceSession s) { return new Session(s); }

    @Override
    public List<String> layerPointKinds() {
        return List.of(CapturePoints.Q, CapturePoints.K, CapturePoints.V, CapturePoints.K_READ, CapturePoints.V_READ,
                CapturePoints.ATTN_OUT, CapturePoints.MLP_OUT, CapturePoints.MOE_OUT, CapturePoints.OUT);
    }

    @Override
    public List<String> faultNames() { return Arrays.stream(Fault.values()).map(Fault::id).toList(); }

    public record Loaded(Gemma4Model model) implements LoadedModel {
        @Override public Architecture architecture() { return INSTANCE; }
        @Override public Path directory() { return model.directory(); }
        @Override public String modelType() { return "gemma4_text"; }
        @Override public int numLayers() { return model.config().numLayers(); }
        @Override public int vocabSize() { return model.config().vocabSize(); }
        @Override public int maxPositions() { return model.config().maxPositions(); }

        @Override
        public List<String> layerPoints(int layer) {
            var spec = model.config().layer(layer);
            var out = new ArrayList<String>(INSTANCE.layerPointKinds());
            if (spec.kvShared()) out.removeAll(List.of(CapturePoints.K, CapturePoints.V));
            if (!model.config().moe()) out.remove(CapturePoints.MOE_OUT);
            return out;
        }

        @Override
        public List<String> pointNames() {
            var out = new ArrayList<>(LoadedModel.super.pointNames());
            if (model.config().hasPle()) out.add(1, CapturePoints.PLE);
            return out;
        }

        @Override
        public ModelSession newSession(Probe probe) {
            var s = model.newSession(EngineOptions.defaults().withProbe(probe));
            return new Session(s);
        }

        @Override
        public ModelSession newSession(Probe probe, java.util.Collection<String> faults) {
            var set = java.util.EnumSet.noneOf(Fault.class);
            for (String id : faults) set.add(Fault.byId(id));
            return new Session(model.newSession(EngineOptions.defaults().withFaults(set).withProbe(probe)));
        }

        @Override public String configSha256() { return model.configSha256(); }
        @Override public String weightsSha256() { return model.weightsSha256(); }
        @Override public void close() { model.close(); }
    }

    private record Session(InferenceSession s) implements ModelSession {
        @Override public float[] forward(int[] tokens) { return s.forward(tokens); }
        @Override public int position() { return s.position(); }
        @Override public void setProbe(Probe probe) { s.setProbe(probe); }
        @Override public State snapshot() { return new Snap(s.snapshot()); }

        @Override
        public void restore(State state) {
            if (!(state instanceof Snap(KvSnapshot kv)))
                throw new IllegalArgumentException("not a Gemma 4 session state: " + state);
            s.restore(kv);
        }
    }

    private record Snap(KvSnapshot kv) implements ModelSession.State {
        @Override public int position() { return kv.tokens().length; }
    }
}
