package dev.decodiff.harness.arch.gemma4;

import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.harness.arch.BenchModel;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.List;

/** A Gemma 4 model as a decode bench of several checkpoints measures it (`bench --quantized`): exact defaults, no recurrent mixer. */
record Gemma4BenchModel(Gemma4Model model) implements BenchModel {
    static Gemma4BenchModel load(Path dir) { return new Gemma4BenchModel(Gemma4Model.load(dir)); }

    @Override public int vocabSize() { return model.config().vocabSize(); }

    @Override public long weightBytesPerToken() { return model.weightBytesPerToken(); }

    @Override public String weightPlacement() { return model.weightPlacement(); }

    @Override public List<MemorySegment> streamedWeights() { return model.weights().streamed(); }

    @Override public List<dev.decodiff.metal.WeightMatrix> streamedMatrices() { return model.weights().streamedMatrices(); }

    @Override
    public Session newSession() {
        var s = model.newSession();
        return new Session() {
            @Override public float[] forward(int[] tokens) { return s.forward(tokens); }
            @Override public long recurrentNanos() { return 0; }
        };
    }

    @Override public void close() { model.close(); }
}
