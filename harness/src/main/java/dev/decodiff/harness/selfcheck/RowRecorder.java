package dev.decodiff.harness.selfcheck;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.Probe;

import java.util.HashMap;
import java.util.Map;

/**
 * Records, per absolute position, the row of every per-position capture point (q, k, v, attn.out, mlp.out,
 * moe.out, out, embed, final_norm), so runs that split the same tokens into different steps can be lined up.
 */
final class RowRecorder implements Probe {
    /** point → position → row. */
    final Map<String, Map<Integer, float[]>> rows = new HashMap<>();
    private int start;

    @Override
    public boolean wants(String point) {
        String kind = CapturePoints.kindOf(point);
        return !kind.equals("attn.k_read") && !kind.equals("attn.v_read") && !kind.equals(CapturePoints.LOGITS)
                && !kind.equals(CapturePoints.PLE);
    }

    @Override
    public void beginStep(int step, int start, int length) { this.start = start; }

    @Override
    public float[] capture(String point, int[] shape, float[] data) {
        int T = shape[0];
        int width = data.length / T;
        var byPos = rows.computeIfAbsent(point, k -> new HashMap<>());
        for (int t = 0; t < T; t++) {
            var row = new float[width];
            System.arraycopy(data, t * width, row, 0, width);
            byPos.put(start + t, row);
        }
        return null;
    }
}
