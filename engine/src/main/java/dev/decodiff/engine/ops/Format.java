package dev.decodiff.engine.ops;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.function.Supplier;

/** A number format an engine may round an fp32 value to (round to nearest, ties to even; specials kept). */
public enum Format {
    F32("fp32"), BF16("bf16"), F16("fp16");

    private final String id;

    Format(String id) { this.id = id; }

    public String id() { return id; }

    public float round(float x) {
        if (this == F32) return x;
        var t = TIES.get();
        if (t != null) return t.round(this, x);
        var j = JITTER.get();
        return j == null ? plain(x) : j.round(this, x);
    }

    private float plain(float x) {
        return switch (this) {
            case F32 -> x;
            case BF16 -> bf16(x);
            case F16 -> Float.float16ToFloat(Float.floatToFloat16(x));
        };
    }

    /** x rounded to the nearest integer (ties to even), under the same near-tie rule as {@link #round}: a block quantizer's rounding. */
    public static float rint(float x) {
        var t = TIES.get();
        return t == null ? (float) Math.rint(x) : t.rint(x);
    }

    /** The fp16 bit pattern of x (the index into ggml's GELU table), under the same near-tie rule as {@link #round}. */
    public static short f16Bits(float x) { return Float.floatToFloat16(F16.round(x)); }

    /** Rounds a[off, off+n) in place. */
    public void round(float[] a, int off, int n) {
        if (this == F32) return;
        for (int i = off; i < off + n; i++) a[i] = round(a[i]);
    }

    public float[] round(float[] a) {
        round(a, 0, a.length);
        return a;
    }

    static float bf16(float x) {
        if (Float.isNaN(x)) return x;
        int b = Float.floatToRawIntBits(x);
        b += 0x7FFF + ((b >>> 16) & 1);
        return Float.intBitsToFloat(b & 0xFFFF0000);
    }

    /**
     * Roundings whose input lies within 2⁻²⁰ (relative) of a rounding boundary: there, two correct implementations
     * whose fp32 arithmetic differs only in order round to different neighbours. While a Ties is set on this thread,
     * every rounding is counted; a recording one collects the counts of such near-ties, and the counts in
     * {@code flip} round to the other neighbour. An op recomputed twice meets the same roundings in the same order,
     * so a count names one rounding.
     */
    private static final class Ties {
        private final Set<Integer> flip;
        private final List<long[]> recorded;
        private int count;

        Ties(Set<Integer> flip, List<long[]> recorded) {
            this.flip = flip;
            this.recorded = recorded;
        }

        float rint(float x) {
            int i = count++;
            float r = (float) Math.rint(x);
            if (recorded == null && !flip.contains(i)) return r;
            float lo = (float) Math.rint(x * (1f - 0x1p-20f)), hi = (float) Math.rint(x * (1f + 0x1p-20f));
            if (lo == hi) return r;
            if (recorded != null) recorded.add(new long[]{i, Double.doubleToLongBits(Math.abs(x - (lo + hi) / 2) / Math.abs(x))});
            return flip.contains(i) ? (r == lo ? hi : lo) : r;
        }

        float round(Format f, float x) {
            int i = count++;
            float r = f.plain(x);
            if (recorded == null && !flip.contains(i)) return r;
            float lo = f.plain(x * (1f - 0x1p-20f)), hi = f.plain(x * (1f + 0x1p-20f));
            if (lo == hi) return r;
            if (recorded != null) {
                // how near: the input's distance to the boundary between its two neighbours, relative to the input
                float mid = (lo + hi) / 2;
                recorded.add(new long[]{i, Double.doubleToLongBits(Math.abs((double) x - mid) / Math.abs(x))});
            }
            return flip.contains(i) ? (r == lo ? hi : lo) : r;
        }
    }

    private static final ThreadLocal<Ties> TIES = new ThreadLocal<>();

    /**
     * Stochastic rounding: each value goes to one of its two neighbours with probability proportional to its nearness.
     * An engine of the same precision class that orders its arithmetic otherwise, fuses other sub-ops or rounds at
     * other points, lands on one or the other neighbour at every rounding; sampling them at random draws outcomes from
     * the spread such engines produce (with a variance somewhat above round-to-nearest's, which errs on the side of
     * calling rounding rounding).
     */
    private static final class Jitter {
        private final java.util.SplittableRandom random;

        Jitter(long seed) { random = new java.util.SplittableRandom(seed); }

        float round(Format f, float x) {
            float r = f.plain(x);
            if (r == x || !Float.isFinite(r) || !Float.isFinite(x)) return r;
            float other = f.neighbour(r, x > r);
            if (!Float.isFinite(other)) return r;
            double p = Math.abs((double) x - r) / Math.abs((double) other - r);
            return random.nextDouble() < p ? other : r;
        }
    }

    private static final ThreadLocal<Jitter> JITTER = new ThreadLocal<>();

    /** The next representable value of this format after r (itself representable), upwards or downwards. */
    private float neighbour(float r, boolean up) {
        return switch (this) {
            case F32 -> up ? Math.nextUp(r) : Math.nextDown(r);
            case BF16 -> {
                if (r == 0) yield Float.intBitsToFloat(up ? 0x10000 : 0x80010000);
                int b = Float.floatToRawIntBits(r);
                boolean away = up == (r > 0); // away from zero: a larger magnitude
                yield Float.intBitsToFloat(b + (away ? 0x10000 : -0x10000));
            }
            case F16 -> {
                short h = Float.floatToFloat16(r);
                if (r == 0) yield Float.float16ToFloat((short) (up ? 1 : 0x8001));
                boolean away = up == (r > 0);
                yield Float.float16ToFloat((short) (h + (away ? 1 : -1)));
            }
        };
    }

    /**
     * Runs op with every rounding of this thread stochastic ({@link Jitter}), seeded: one sampled outcome of an engine
     * of the hypothesis's precision class whose roundings fall otherwise than round-to-nearest's.
     */
    public static <T> T sampled(long seed, Supplier<T> op) {
        JITTER.set(new Jitter(seed));
        try {
            return op.get();
        } finally {
            JITTER.remove();
        }
    }

    /** Runs op and returns the counts of its near-tie roundings, nearest the boundary first (at most {@code max}). */
    public static List<Integer> nearTies(Runnable op, int max) {
        var rec = new ArrayList<long[]>();
        TIES.set(new Ties(Set.of(), rec));
        try {
            op.run();
        } finally {
            TIES.remove();
        }
        rec.sort(java.util.Comparator.comparingDouble(r -> Double.longBitsToDouble(r[1])));
        var out = new ArrayList<Integer>();
        for (int i = 0; i < Math.min(max, rec.size()); i++) out.add((int) rec.get(i)[0]);
        return out;
    }

    /** Runs op with the near-tie roundings of these counts rounded to the other neighbour. */
    public static <T> T flipped(Set<Integer> flip, Supplier<T> op) {
        TIES.set(new Ties(flip, null));
        try {
            return op.get();
        } finally {
            TIES.remove();
        }
    }
}
