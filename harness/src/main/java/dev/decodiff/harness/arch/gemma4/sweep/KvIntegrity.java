package dev.decodiff.harness.arch.gemma4.sweep;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.Gemma4Config;
import dev.decodiff.engine.KvType;
import dev.decodiff.engine.LayerType;
import dev.decodiff.harness.report.Fmt;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The KV-integrity rules checked on every step of one sequence, from its own captures (no reference):
 * <ol>
 * <li>a read window covers exactly the positions the mask allows (p−W+1…p on a sliding layer, 0…p on a full one);</li>
 * <li>each row read back is the row that entered the cache at that position, through the storage type's rounding
 * (rows of the step itself are attended before they are stored, so unrounded) — which also catches an entry that
 * changed after it was written, since every later read compares with what was written.</li>
 * </ol>
 * Logical position = rotation position is checked by the schedules' comparison: a key rotated for another position is
 * not the cold run's key at that position. The written rows travel with snapshots and copies ({@link #copy}).
 */
final class KvIntegrity {
    private static final double TOLERANCE = 1e-6;

    private final Gemma4Config cfg;
    private final KvType keyType, valueType;
    /** layer → position → row as it entered the cache (unrounded). */
    private final Map<Integer, Map<Integer, float[]>> keys, values;

    KvIntegrity(Gemma4Config cfg, KvType keyType, KvType valueType) {
        this(cfg, keyType, valueType, new HashMap<>(), new HashMap<>());
    }

    private KvIntegrity(Gemma4Config cfg, KvType k, KvType v, Map<Integer, Map<Integer, float[]>> keys, Map<Integer, Map<Integer, float[]>> values) {
        this.cfg = cfg;
        this.keyType = k;
        this.valueType = v;
        this.keys = keys;
        this.values = values;
    }

    KvIntegrity copy() {
        return new KvIntegrity(cfg, keyType, valueType, deep(keys), deep(values));
    }

    private static Map<Integer, Map<Integer, float[]>> deep(Map<Integer, Map<Integer, float[]>> m) {
        var out = new HashMap<Integer, Map<Integer, float[]>>();
        m.forEach((k, v) -> out.put(k, new HashMap<>(v)));
        return out;
    }

    static boolean wants(String kind) {
        return kind.equals(CapturePoints.K) || kind.equals(CapturePoints.V) || CapturePoints.isCacheRead(kind);
    }

    /** One capture of this sequence's step [start, start+length); violations go to {@code out}. */
    void capture(String point, int[] shape, float[] data, int step, int seq, int start, int length, List<ScheduleRun.Violation> out) {
        int layer = CapturePoints.layerOf(point);
        String kind = CapturePoints.kindOf(point);
        int rows = shape[0], width = data.length / Math.max(1, rows);
        if (kind.equals(CapturePoints.K) || kind.equals(CapturePoints.V)) {
            var byPos = (kind.equals(CapturePoints.K) ? keys : values).computeIfAbsent(layer, l -> new HashMap<>());
            for (int t = 0; t < rows; t++) byPos.put(start + t, slice(data, t * width, width));
            return;
        }
        boolean isKey = kind.equals(CapturePoints.K_READ);
        var spec = cfg.layer(layer);
        int src = spec.kvSource(), p = start + length - 1;
        boolean sliding = spec.type() == LayerType.SLIDING;
        int expected = sliding ? Math.min(cfg.slidingWindow(), p + 1) : p + 1;
        if (rows != expected) {
            out.add(new ScheduleRun.Violation(step, seq, p, point, "read window = mask", Double.POSITIVE_INFINITY,
                    "the read window at position " + p + " holds " + rows + " positions where the " + (sliding
                            ? "sliding layer's mask (window " + cfg.slidingWindow() + ")" : "full layer's causal mask") + " allows " + expected));
            return;
        }
        var entered = (isKey ? keys : values).get(src);
        var type = isKey ? keyType : valueType;
        var wrong = new ArrayList<Integer>();
        double num = 0, den = 0;
        for (int j = 0; j < rows; j++) {
            int q = p - rows + 1 + j;
            float[] e = entered == null ? null : entered.get(q);
            if (e == null || e.length != width) { wrong.add(q); num = Double.POSITIVE_INFINITY; continue; }
            if (q < start && type != KvType.F32) {
                e = e.clone();
                type.roundTrip(e, 0, 1, width);
            }
            double rn = 0, rd = 0;
            for (int x = 0; x < width; x++) {
                double d = (double) data[j * width + x] - e[x];
                rn += d * d;
                rd += (double) e[x] * e[x];
            }
            num += rn;
            den += rd;
            if (!(ratio(rn, rd) <= TOLERANCE)) wrong.add(q);
        }
        if (wrong.isEmpty()) return;
        int q0 = wrong.getFirst();
        out.add(new ScheduleRun.Violation(step, seq, p, point, "read = written", ratio(num, den),
                "at position " + p + " the " + (isKey ? "keys" : "values") + " read back for " + (wrong.size() == 1 ? "position " : "positions ")
                        + Fmt.ranges(wrong, 0) + " are not the rows that entered " + (src == layer ? "this layer's" : "layer " + src + "'s")
                        + " cache there" + (type == KvType.F32 ? "" : " (after " + type + " rounding)")
                        + whose(slice(data, (q0 - (p - rows + 1)) * width, width), q0, entered)));
    }

    /** Names the position whose row a wrong row is, when it is one (a ring slot off by one, a stale row). */
    private static String whose(float[] row, int q, Map<Integer, float[]> entered) {
        if (entered == null) return "";
        int best = -1;
        double bestRel = 1e-3;
        for (var e : entered.entrySet()) {
            if (e.getKey() == q || e.getValue().length != row.length) continue;
            double n = 0, d = 0;
            for (int i = 0; i < row.length; i++) {
                double x = (double) row[i] - e.getValue()[i];
                n += x * x;
                d += (double) e.getValue()[i] * e.getValue()[i];
            }
            double r = ratio(n, d);
            if (r < bestRel) { bestRel = r; best = e.getKey(); }
        }
        return best < 0 ? "" : ": position " + q + "'s row holds position " + best + "'s";
    }

    private static float[] slice(float[] a, int off, int n) {
        var r = new float[n];
        System.arraycopy(a, off, r, 0, n);
        return r;
    }

    private static double ratio(double n, double d) { return d == 0 ? (n == 0 ? 0 : Double.POSITIVE_INFINITY) : Math.sqrt(n / d); }
}
