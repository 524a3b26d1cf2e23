package dev.decodiff.harness.compare;

import dev.decodiff.metal.TensorView;

import java.util.function.Consumer;

/**
 * A candidate that hands over each tensor of a step as it computes it (a live engine), so a comparison holds one
 * tensor at a time instead of a whole step: a 4,096-token prefill of a 35-layer model captures gigabytes per step.
 */
public interface StreamingCandidate extends CandidateSource {
    /** How a streamed step ended: the candidate's greedy choice and its top-2 margin, and where it came from. */
    record StepEnd(Integer nextToken, Double top2Margin, String origin) {}

    /**
     * Computes step s (s = 0, 1, 2, … in order), giving each captured tensor to {@code sink} as soon as it exists.
     * A tensor may be kept after the call returns (its data is the candidate's private copy), but need not be.
     *
     * @throws EngineThrewException when the engine throws while computing the step
     */
    StepEnd stream(int s, Consumer<TensorView> sink);
}
