package dev.decodiff.harness.arch.gemma4;

import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.engine.ModelWeights;
import dev.decodiff.harness.arch.BenchModel;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;

/**
 * A Gemma 4 model as `decodiff bench` measures it: the default bench's weights (through {@link Gemma4Engine#benchModel}),
 * and each checkpoint of a decode bench of several (`bench --quantized`): exact defaults, no recurrent mixer.
 */
record Gemma4BenchModel(Gemma4Model model) implements BenchModel {
    static Gemma4BenchModel load(Path dir) { return new Gemma4BenchModel(Gemma4Model.load(dir)); }

    @Override public int vocabSize() { return model.config().vocabSize(); }

    @Override public long weightBytesPerToken() { return model.weightBytesPerToken(); }

    @Override public String weightPlacement() { return model.weightPlacement(); }

    @Override public List<MemorySegment> streamedWeights() { return model.weights().streamed(); }

    @Override public List<dev.decodiff.metal.WeightMatrix> streamedMatrices() { return model.weights().streamedMatrices(); }

    /** Mapped anew only where the model reads a resident copy; otherwise the streamed weights are the mapping. */
    @Override
    public Optional<List<MemorySegment>> mappedStreamedWeights() {
        return model.weightsResident() ? Optional.of(ModelWeights.load(model.files(), model.config()).streamed()) : Optional.empty();
    }

    /** The first layer's FFN gate: a prefill product of the model's own shape. */
    @Override
    public Optional<dev.decodiff.metal.WeightMatrix> prefillGemmMatrix() { return Optional.of(model.weights().layers().getFirst().gate()); }

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
