package dev.decodiff.harness.bisect;

import dev.decodiff.harness.compare.detect.ReferenceHistory;
import dev.decodiff.harness.dump.DumpManifest;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.dump.DumpStep;
import dev.decodiff.metal.TensorView;

import java.util.HashMap;
import java.util.Map;

/**
 * The reference dump's tensors for substitution: step files are mapped on first use and kept open, and a point's
 * data is turned into floats (the engine's row-major layout) once. Close to unmap.
 */
public final class ReferenceTensors implements AutoCloseable, ReferenceHistory {
    private final DumpReader ref;
    private final Map<Integer, DumpStep> open = new HashMap<>();
    private final Map<Integer, Map<String, float[]>> floats = new HashMap<>();

    public ReferenceTensors(DumpReader ref) { this.ref = ref; }

    public DumpReader reader() { return ref; }

    @Override
    public DumpManifest manifest() { return ref.manifest(); }

    public boolean has(int step, String point) { return ref.points(step).contains(point); }

    /** The mapped step (valid until {@link #close()}). */
    public DumpStep step(int step) { return open.computeIfAbsent(step, ref::readStep); }

    public TensorView view(int step, String point) { return step(step).tensor(point); }

    /** The point's values as floats, or null when the reference did not record it. */
    @Override
    public float[] floats(int step, String point) {
        if (!has(step, point)) return null;
        return floats.computeIfAbsent(step, s -> new HashMap<>()).computeIfAbsent(point, p -> view(step, p).toFloats());
    }

    @Override
    public void close() {
        open.values().forEach(DumpStep::close);
        open.clear();
        floats.clear();
    }
}
