package dev.decodiff.harness.live;

import dev.decodiff.engine.Probe;
import dev.decodiff.harness.dump.CapturedTensor;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.Predicate;

/**
 * A probe that replaces nothing and hands each wanted tensor on as the engine produces it: to the consumer set with
 * {@link #sendTo} (a streaming comparison or dump, which holds one tensor at a time), else into the current step's
 * map ({@link #take}). A probe made with {@link #discarding} captures the same points and keeps none.
 */
public final class CapturingProbe implements Probe {
    private final Predicate<String> wanted;
    private final boolean keep;
    private Consumer<CapturedTensor> sink;
    private Map<String, CapturedTensor> current = new LinkedHashMap<>();

    public CapturingProbe(Predicate<String> wanted) { this(wanted, true); }

    private CapturingProbe(Predicate<String> wanted, boolean keep) {
        this.wanted = wanted;
        this.keep = keep;
    }

    /** Runs the engine's capture path for the wanted points (copies and all) and drops what it captures. */
    public static CapturingProbe discarding(Predicate<String> wanted) { return new CapturingProbe(wanted, false); }

    /** Where captured tensors go from now on; null to collect them for {@link #take} again. */
    public void sendTo(Consumer<CapturedTensor> sink) { this.sink = sink; }

    @Override
    public boolean wants(String point) { return wanted.test(point); }

    @Override
    public void beginStep(int step, int start, int length) { current = new LinkedHashMap<>(); }

    @Override
    public float[] capture(String point, int[] shape, float[] data) {
        var t = CapturedTensor.of(point, shape, data);
        if (sink != null) sink.accept(t);
        else if (keep) current.put(point, t);
        return null;
    }

    /** The tensors collected since the last beginStep, in capture order; hands them over. */
    public Map<String, CapturedTensor> take() {
        var out = current;
        current = new LinkedHashMap<>();
        return out;
    }
}
