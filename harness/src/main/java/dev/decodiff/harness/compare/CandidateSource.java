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

    /** What the source says about its own completeness (a dump without its completeness mark, …); empty when whole. */
    default java.util.List<String> gaps() { return java.util.List.of(); }

    /** The point globs the source was explicitly limited to (a dump's selected_points), or null when it holds every point. */
    default java.util.List<String> selectedPoints() { return null; }

    /** The source's declared cut of its k_read/v_read rows (a dump's read_rows), or null when it holds every row read. */
    default dev.decodiff.harness.dump.ReadRows readRows() { return null; }

    /** Who computed the candidate and how (engine, kernels, KV cache, faults), or null when unknown. */
    default dev.decodiff.harness.dump.DumpManifest.Producer producer() { return null; }

    /** Anything the source learned that the report should mention (e.g. how the observer check was settled), or null. */
    default String note() { return null; }

    @Override
    default void close() {}
}
