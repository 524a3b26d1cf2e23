package dev.decodiff.harness.compare.attribution;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.ops.Format;
import dev.decodiff.metal.TensorView;

import java.util.HashMap;
import java.util.Map;

/**
 * Attribution over a side's recorded tensors, kept per step: each point is held as it arrives (an input of the ops
 * after it), the points a later step reads ({@link #carriesAcrossSteps}) are kept across steps, and each cell over
 * tolerance (every cell for a third-party candidate) is recomputed by the architecture's {@link #attribute}.
 */
public abstract class RecordedInputsAttribution extends OpAttribution {
    /** This step's tokens. */
    protected int[] stepTokens;
    /** What the side recorded at this step so far, by point name. */
    protected Map<String, float[]> have = new HashMap<>();
    /** By point name, what the side recorded at the last step that had it, for the points a later step reads. */
    protected final Map<String, float[]> previous = new HashMap<>();
    private final Map<String, float[]> thisStep = new HashMap<>();

    protected RecordedInputsAttribution(boolean everyCell, Format stated, boolean reference) {
        super(everyCell, stated, reference);
    }

    /** The model's layer count: points of deeper layers are not this model's and are left alone. */
    protected abstract int numLayers();

    /** The local error of one cell, recomputed from {@link #have} and {@link #previous}; null where the op is not described. */
    protected abstract LocalError attribute(String point, String kind, int layer, float[] cand);

    @Override
    public void beginStep(int step, int start, int length, int[] tokens) {
        this.step = step;
        this.start = start;
        this.T = length;
        this.stepTokens = java.util.Arrays.copyOfRange(tokens, start, start + length);
        have = new HashMap<>();
        thisStep.clear();
    }

    @Override
    public void accept(String point, TensorView t, boolean failed) {
        String kind = CapturePoints.kindOf(point);
        int layer = CapturePoints.layerOf(point);
        if (layer >= numLayers()) return;
        float[] c = t.floatsToRead();
        have.put(point, c);
        if (carriesAcrossSteps(kind)) thisStep.put(point, c);
        if (!everyCell && !failed) return;
        try {
            var e = attribute(point, kind, layer, c);
            if (e != null) errors.put(key(step, point), e);
        } catch (RuntimeException ex) {
            errors.put(key(step, point), LocalError.unattributed(step, point, FP32.tolerance(point), "its inputs do not have the checkpoint's shapes"));
        }
    }

    @Override
    public void endStep() {
        // a step fed nothing (the reference side is fed only what later steps read when nothing is over tolerance)
        // keeps the older history
        previous.putAll(thisStep);
        have = new HashMap<>();
    }

    /** This step's tensor of a layer's point. */
    protected float[] get(int layer, String kind) { return have.get(CapturePoints.layer(layer, kind)); }

    /**
     * Null where both of a layer's cache reads this step hold every position attention reads, 0…start+T−1 of
     * {@code stride} values each; else the cell's unattributed error, which says so (a short or long read is evidence
     * of nothing an op could recompute from).
     */
    protected LocalError cacheReadsShort(String point, int layer, int stride, double tol) {
        for (String kind : new String[]{CapturePoints.K_READ, CapturePoints.V_READ})
            if (get(layer, kind).length != (start + T) * stride)
                return LocalError.unattributed(step, point, tol, "its cache reads do not hold positions 0…" + (start + T - 1));
        return null;
    }
}
