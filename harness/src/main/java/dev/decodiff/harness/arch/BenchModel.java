package dev.decodiff.harness.arch;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;

/**
 * A loaded checkpoint as `decodiff bench` measures a family's own decode: the memory a decode step streams (the read
 * ceiling's subject), where its weights live, and sessions that time their recurrent mixer.
 */
public interface BenchModel extends AutoCloseable {
    /** Loads a checkpoint folder of the family for the bench. */
    @FunctionalInterface
    interface Loader {
        BenchModel load(Path dir);
    }

    /** One conversation, fed a step at a time. */
    interface Session {
        /** The logits of the last position fed. */
        float[] forward(int[] tokens);

        /** Nanoseconds spent so far in the recurrent (linear-attention) mixer; 0 for a family without one. */
        long recurrentNanos();
    }

    int vocabSize();

    /** The bytes of weights a decode step reads. */
    long weightBytesPerToken();

    /** Where the weights live (file mapping, huge pages), in words. */
    String weightPlacement();

    /** The memory a decode step streams: each distinct matrix's data once. */
    List<MemorySegment> streamedWeights();

    /** The matrices a decode step streams (all of an MoE layer's experts), each once: what its matvecs read. */
    List<dev.decodiff.metal.WeightMatrix> streamedMatrices();

    /**
     * The streamed matrices mapped afresh from the checkpoint's files, where the engine reads a copy of them elsewhere
     * (huge pages): the default bench's read ceilings read both. Empty where the engine reads the mapped files
     * themselves, or the family does not offer it. The caller unloads the pages.
     */
    default Optional<List<MemorySegment>> mappedStreamedWeights() { return Optional.empty(); }

    /**
     * A weight matrix of a real prefill product's shape, for the default bench's GEMMs against the compute ceilings;
     * empty where the family does not offer one.
     */
    default Optional<dev.decodiff.metal.WeightMatrix> prefillGemmMatrix() { return Optional.empty(); }

    /** A new conversation with no probe. */
    Session newSession();

    @Override
    void close();
}
