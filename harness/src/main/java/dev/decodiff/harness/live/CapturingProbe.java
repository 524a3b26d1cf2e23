package dev.decodiff.harness.live;

import dev.decodiff.engine.Probe;
import dev.decodiff.harness.dump.CapturedTensor;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Predicate;

/** A probe that keeps a copy of the wanted points of the current step and replaces nothing. */
public final class CapturingProbe implements Probe {
    private final Predicate<String> wanted;
    private Map<String, CapturedTensor> current = new LinkedHashMap<>();

    public CapturingProbe(Predicate<String> wanted) { this.wanted = wanted; }

    @Override
    public boolean wants(String point) { return wanted.test(point); }

    @Override
    public void beginStep(int step, int start, int length) { current = new LinkedHashMap<>(); }

    @Override
    public float[] capture(String point, int[] shape, float[] data) {
        current.put(point, CapturedTensor.of(point, shape, data));
        return null;
    }

    /** The tensors captured since the last beginStep, in capture order; hands them over. */
    public Map<String, CapturedTensor> take() {
        var out = current;
        current = new LinkedHashMap<>();
        return out;
    }
}
