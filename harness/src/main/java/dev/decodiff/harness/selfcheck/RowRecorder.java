package dev.decodiff.harness.selfcheck;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.Probe;

import java.util.HashMap;
import java.util.Map;

/**
 * Records, per absolute position, the row of every per-position capture point (q, k, v, attn.out, mlp.out,
 * moe.out, out, embed, final_norm), so runs that split the same tokens into different steps can be lined up.
 * k_read and v_read (what the last position of a step reads) are kept under that last position. A recurrent
 * state (Qwen3.5's linear.conv_state_read / state_read, read at a step's start) is kept under the step's first
 * position, the one computed from it; a state written at a step's end (conv_state, state) under its last position.
 */
public final class RowRecorder implements Probe {
    /** point → position → row. */
    public final Map<String, Map<Integer, float[]>> rows = new HashMap<>();
    private int start;
    private int length;

    @Override
    public boolean wants(String point) {
        String kind = CapturePoints.kindOf(point);
        return !kind.equals(CapturePoints.LOGITS) && !kind.equals(CapturePoints.PLE);
    }

    @Override
    public void beginStep(int step, int start, int length) {
        this.start = start;
        this.length = length;
    }

    @Override
    public float[] capture(String point, int[] shape, float[] data) {
        var byPos = rows.computeIfAbsent(point, k -> new HashMap<>());
        String kind = CapturePoints.kindOf(point);
        if (CapturePoints.isLinearState(kind)) {
            boolean read = kind.equals(CapturePoints.LINEAR_CONV_STATE_READ) || kind.equals(CapturePoints.LINEAR_STATE_READ);
            byPos.put(read ? start : start + length - 1, data.clone());
            return null;
        }
        if (point.endsWith(".attn.k_read") || point.endsWith(".attn.v_read")) {
            byPos.put(start + length - 1, data.clone());
            return null;
        }
        int T = shape[0];
        int width = data.length / T;
        for (int t = 0; t < T; t++) {
            var row = new float[width];
            System.arraycopy(data, t * width, row, 0, width);
            byPos.put(start + t, row);
        }
        return null;
    }
}
