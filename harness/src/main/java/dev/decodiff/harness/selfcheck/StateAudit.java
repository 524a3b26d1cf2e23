package dev.decodiff.harness.selfcheck;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.Probe;
import dev.decodiff.harness.compare.CellStats;

import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;

/**
 * Watches a recurrent model's state hand-over inside one run: the conv and recurrent state a step reads at its start
 * must be, bit for bit, the state the step before wrote at its end (nothing may touch a state between two steps).
 * The recurrent counterpart of {@code CacheAudit} (Gemma 4's): a state dropped, zeroed or read from a stale buffer shows here at
 * the read itself, before anything computed from it.
 */
final class StateAudit implements Probe {
    /** A read that is not what was written: at the first position of its step. */
    record Violation(int step, int position, String point, double relL2) {}

    /** write point → the state the last step wrote there. */
    private final Map<String, float[]> written = new HashMap<>();
    private int step;
    private int start;
    int reads;
    int violations;
    Violation first;

    @Override
    public boolean wants(String point) { return CapturePoints.isLinearState(CapturePoints.kindOf(point)); }

    @Override
    public void beginStep(int step, int start, int length) {
        this.step = step;
        this.start = start;
    }

    @Override
    public float[] capture(String point, int[] shape, float[] data) {
        String kind = CapturePoints.kindOf(point);
        String prefix = point.substring(0, point.length() - kind.length());
        switch (kind) {
            case CapturePoints.LINEAR_CONV_STATE -> written.put(point, data.clone());
            case CapturePoints.LINEAR_STATE -> written.put(point, data.clone());
            case CapturePoints.LINEAR_CONV_STATE_READ -> check(point, data, written.get(prefix + CapturePoints.LINEAR_CONV_STATE));
            case CapturePoints.LINEAR_STATE_READ -> check(point, data, written.get(prefix + CapturePoints.LINEAR_STATE));
            default -> { }
        }
        return null;
    }

    private void check(String point, float[] read, float[] wrote) {
        if (wrote == null) return; // the first step of a session restored from a snapshot: nothing written in this run yet
        reads++;
        if (Arrays.equals(read, wrote)) return;
        violations++;
        if (first == null) first = new Violation(step, start, point, CellStats.relL2(read, wrote));
    }
}
