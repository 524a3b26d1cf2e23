package dev.decodiff.harness.compare;

import dev.decodiff.harness.dump.StepTensors;
import dev.decodiff.metal.TensorView;

import java.util.Set;

/**
 * What is left of a streamed candidate step once it is compared: its positions (the reference's), its greedy choice,
 * and at most one tensor — the candidate's at the step's first failing cell, which is all a diagnosis reads of the
 * candidate side.
 */
final class StreamedStep implements StepTensors {
    private final StepTensors ref;
    private final TensorView kept;
    private final StreamingCandidate.StepEnd end;

    StreamedStep(StepTensors ref, TensorView kept, StreamingCandidate.StepEnd end) {
        this.ref = ref;
        this.kept = kept;
        this.end = end;
    }

    @Override public int index() { return ref.index(); }

    @Override public int start() { return ref.start(); }

    @Override public int length() { return ref.length(); }

    @Override public Set<String> points() { return kept == null ? Set.of() : Set.of(kept.name()); }

    @Override
    public TensorView tensor(String point) {
        if (kept == null || !kept.name().equals(point))
            throw new IllegalStateException(origin() + ": only the first failing cell's tensor is kept, not '" + point + "'");
        return kept;
    }

    @Override public String origin() { return end.origin(); }

    @Override public Integer nextToken() { return end.nextToken(); }

    @Override public Double top2Margin() { return end.top2Margin(); }

    @Override public void close() {}
}
