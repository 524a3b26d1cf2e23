package dev.decodiff.harness.dump;

import dev.decodiff.metal.TensorView;

import java.util.Set;

/** The tensors of one step, from a dump (memory-mapped) or a live engine (captured); close when done. */
public interface StepTensors extends AutoCloseable {
    int index();

    /** The first position this step fed. */
    int start();

    /** How many positions it fed. */
    int length();

    Set<String> points();

    TensorView tensor(String point);

    /** Where the tensors come from, for messages: a step file, or "live engine, step 3". */
    String origin();

    /** The producer's greedy choice after this step, if known. */
    Integer nextToken();

    /** Its top-1 minus top-2 logit, if known. */
    Double top2Margin();

    /** Releases the step's tensors; a comparison may call it from a helper thread once it is done with the step. */
    @Override
    void close();
}
