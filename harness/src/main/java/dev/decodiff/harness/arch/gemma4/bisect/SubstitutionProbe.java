package dev.decodiff.harness.arch.gemma4.bisect;

import dev.decodiff.harness.bisect.ReferenceTensors;
import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.Probe;
import dev.decodiff.harness.dump.CapturedTensor;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Consumer;

/**
 * Carries out a {@link Plan} inside the engine: hands the engine the reference's attn.k / attn.v at earlier steps
 * (what enters the cache), and the reference's tensors at the target step, recording what the engine computed there.
 * A reference tensor of another length cannot stand in (e.g. a read window of 9 positions where the reference reads 8):
 * it is left as computed and noted.
 */
final class SubstitutionProbe implements Probe {
    private final ReferenceTensors ref;
    private final Plan plan;
    private int step = -1;
    final Map<String, CapturedTensor> captured = new LinkedHashMap<>();
    final Set<String> replaced = new LinkedHashSet<>();
    final Set<String> refused = new LinkedHashSet<>();
    final List<String> notes = new ArrayList<>();

    private Consumer<CapturedTensor> sink;

    SubstitutionProbe(ReferenceTensors ref, Plan plan) {
        this.ref = ref;
        this.plan = plan;
    }

    /** Hands the target step's captured tensors to {@code sink} as produced instead of collecting them in {@link #captured}. */
    void sendTo(Consumer<CapturedTensor> sink) { this.sink = sink; }

    static boolean cacheEntry(String point) {
        String kind = CapturePoints.kindOf(point);
        return kind.equals(CapturePoints.K) || kind.equals(CapturePoints.V);
    }

    @Override
    public boolean wants(String point) {
        if (step < plan.referenceCacheBefore()) return cacheEntry(point) && ref.has(step, point);
        if (step == plan.target()) return plan.capture().test(point) || plan.replace().contains(point);
        return false;
    }

    @Override
    public void beginStep(int step, int start, int length) { this.step = step; }

    @Override
    public float[] capture(String point, int[] shape, float[] data) {
        if (step < plan.referenceCacheBefore()) return substitute(point, data);
        if (step != plan.target()) return null;
        if (plan.capture().test(point)) {
            var t = CapturedTensor.of(point, shape, data);
            if (sink != null) sink.accept(t);
            else captured.put(point, t);
        }
        return plan.replace().contains(point) ? substitute(point, data) : null;
    }

    private float[] substitute(String point, float[] data) {
        float[] r = ref.floats(step, point);
        if (r == null) {
            refused.add(point);
            notes.add("step " + step + ": the reference has no " + point + " to substitute");
            return null;
        }
        if (r.length != data.length) {
            refused.add(point);
            notes.add("step " + step + ": " + point + " cannot be substituted: the engine's has " + data.length
                    + " values, the reference's " + r.length);
            return null;
        }
        if (step == plan.target()) replaced.add(point);
        return r;
    }
}
