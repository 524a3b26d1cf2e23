package dev.decodiff.harness.compare;

import dev.decodiff.harness.dump.StepTensors;

/** The side being judged, read step by step in order: a dump folder or a live engine run. */
public interface CandidateSource extends AutoCloseable {
    /** For reports: "dump out/mine" or "live engine: checkpoints/gemma4-tiny". */
    String describe();

    /** How many of the reference's steps this source can give (a dump may hold fewer). */
    int stepCount();

    /** Step s; called with s = 0, 1, 2, … in order. */
    StepTensors step(int s);

    /** After all steps: the observer-effect verdict ("none", or what differed), or "not_applicable". */
    default String observerEffect() { return "not_applicable"; }

    /** Anything the source learned that the report should mention (e.g. how the observer check was settled), or null. */
    default String note() { return null; }

    @Override
    default void close() {}
}
