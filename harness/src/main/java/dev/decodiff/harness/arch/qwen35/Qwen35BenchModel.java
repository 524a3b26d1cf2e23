package dev.decodiff.harness.arch.qwen35;

import dev.decodiff.engine.qwen35.Qwen35Model;
import dev.decodiff.engine.qwen35.Qwen35Session;
import dev.decodiff.harness.arch.BenchModel;
import dev.decodiff.metal.WeightMatrix;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;

/** A Qwen3.5 model as its bench measures it: the linear-attention mixer's time is its own figure. */
record Qwen35BenchModel(Qwen35Model model) implements BenchModel {
    static Qwen35BenchModel load(Path dir) { return new Qwen35BenchModel(Qwen35Model.load(dir)); }

    @Override public int vocabSize() { return model.config().vocabSize(); }

    @Override public long weightBytesPerToken() { return model.weightBytesPerToken(); }

    @Override public String weightPlacement() { return model.weightPlacement(); }

    /** A packed matrix streams its blocked codes and its groups' scales and biases. */
    @Override
    public List<MemorySegment> streamedWeights() {
        var seen = Collections.newSetFromMap(new IdentityHashMap<WeightMatrix, Boolean>());
        var out = new ArrayList<MemorySegment>();
        for (var w : model.weights().streamedMatrices())
            if (seen.add(w)) {
                out.add(w.data());
                if (w.affine() != null) out.add(w.affine().pairs());
            }
        return out;
    }

    @Override public List<WeightMatrix> streamedMatrices() { return model.weights().streamedMatrices(); }

    @Override
    public Session newSession() {
        Qwen35Session s = model.newSession(null);
        return new Session() {
            @Override public float[] forward(int[] tokens) { return s.forward(tokens); }
            @Override public long recurrentNanos() { return s.linearMixerNanos(); }
        };
    }

    @Override public void close() { model.close(); }
}
