package dev.decodiff.harness.compare;

import dev.decodiff.harness.dump.StepTensors;
import dev.decodiff.metal.MappedPages;
import dev.decodiff.metal.TensorView;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Asks the kernel to read a mapped reference step's next tensors while the engine computes the tensor at hand, so a
 * streamed comparison finds them in memory instead of faulting them in from disk one page run at a time (a
 * 4,096-token prefill step of an E2B-sized model is 5.2 GB, rarely all in the page cache). "Next" is by place in the
 * step file: a dump is written in capture order, and a live engine captures in that order too. Advice only: the
 * comparison reads the same bytes whether the pages came early or not.
 */
final class ReadAhead {
    /** Tensors advised ahead of the one compared: enough to cover a layer's next few captures, not a whole step. */
    private static final int AHEAD = 2;

    private final StepTensors step;
    private final List<String> byPlace;
    private final Map<String, Integer> index = new HashMap<>();

    private ReadAhead(StepTensors step, List<String> byPlace) {
        this.step = step;
        this.byPlace = byPlace;
        for (int i = 0; i < byPlace.size(); i++) index.put(byPlace.get(i), i);
    }

    /** For a step whose tensors lie in a file mapping; null for anything else (nothing to read ahead). */
    static ReadAhead of(StepTensors step) {
        var mapped = new ArrayList<TensorView>();
        for (String p : step.points()) {
            var t = step.tensor(p);
            if (!t.data().isMapped()) return null;
            mapped.add(t);
        }
        mapped.sort(Comparator.comparingLong(t -> t.data().address()));
        return new ReadAhead(step, mapped.stream().map(TensorView::name).toList());
    }

    /** Point {@code p} is being compared: start reading the tensors that follow it. */
    void after(String p) {
        Integer i = index.get(p);
        if (i == null) return;
        for (int k = i + 1; k <= i + AHEAD && k < byPlace.size(); k++) MappedPages.willNeed(step.tensor(byPlace.get(k)).data());
    }
}
