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
     * RoPE over the whole head with a table an architecture computed itself (a scaled table such as Llama 3's), rotated
     * here like every other: angle float(p)·inv_freq[j], rotate-half pairs (j, j + d/2).
     */
    public static Rope ofInverseFrequencies(float[] invFreq, int headDim) {
        if (invFreq.length != headDim / 2) throw new IllegalArgumentException("inv_freq has " + invFreq.length + " entries, head_dim " + headDim + " needs " + headDim / 2);
        return new Rope(headDim, headDim / 2, invFreq.clone());
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

    public static float[] inverseFrequencies(RopeSpec spec, int d) {
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
        int n = 0;
        for (int j = 0; j < half; j++) if (p * invFreq[j] != 0f) n++;
        int[] pairs = new int[n];
        float[] cos = new float[n], sin = new float[n];
        for (int j = 0, i = 0; j < half; j++) {
            float angle = p * invFreq[j];
            if (angle == 0f) continue; // cos 0 = 1, sin 0 = 0 exactly: the pass-through dims of proportional RoPE
            pairs[i] = j;
            cos[i] = (float) StrictMath.cos(angle);
            sin[i] = (float) StrictMath.sin(angle);
            i++;
        }
        a = new Angles(pos, pairs, cos, sin);
        last = a;
        return a;
    }

    /**
     * The rotations of a run of positions [start, start + n) — a multi-token step's, which every layer of this kind
     * applies to its queries and keys: cos/sin of pair pairs[i] at position start + t at [t·pairs.length + i]. Only
     * built where no angle of the run but position 0's is 0 (so every pair rotates at every other position, as
     * {@link #angles} would say; position 0, where nothing rotates, is left to it).
     */
    private record Run(int start, int n, int[] pairs, float[] cos, float[] sin) {}

    private Run run;

    /**
     * Computes the rotations of positions [start, start + n) once for the calls to {@link #apply} that follow (a
     * prefill of 4,096 tokens otherwise computed each position's cos and sin twice in every layer); same values.
     */
    public void prepare(int start, int n) {
        Run r = run;
        if (n < 2 || start < 0 || (r != null && r.start == start && r.n == n)) return;
        int m = 0;
        for (int j = 0; j < half; j++) if (invFreq[j] != 0f) m++;
        int[] pairs = new int[m];
        for (int j = 0, i = 0; j < half; j++) if (invFreq[j] != 0f) pairs[i++] = j;
        float[] cos = new float[n * m], sin = new float[n * m];
        for (int t = start == 0 ? 1 : 0; t < n; t++) {
            float p = (float) (start + t);
            for (int i = 0; i < m; i++) {
                float angle = p * invFreq[pairs[i]];
                if (angle == 0f) return; // an angle that underflows: leave these positions to angles()
                cos[t * m + i] = (float) StrictMath.cos(angle);
                sin[t * m + i] = (float) StrictMath.sin(angle);
            }
        }
        run = new Run(start, n, pairs, cos, sin);
    }

    /** Rotates each of the {@code heads} vectors of x (at x[off + h·headDim]) to position pos, in place. */
    public void apply(float[] x, int off, int heads, int pos) {
        Run r = run;
        if (r != null && pos > 0 && pos >= r.start && pos < r.start + r.n) {
            int m = r.pairs.length;
            rotate(x, off, heads, r.pairs, r.cos, r.sin, (pos - r.start) * m);
            return;
        }
        Angles a = angles(pos);
        rotate(x, off, heads, a.pairs, a.cos, a.sin, 0);
    }

    private void rotate(float[] x, int off, int heads, int[] pairs, float[] cos, float[] sin, int at) {
        for (int i = 0; i < pairs.length; i++) {
            int j = pairs[i];
            float c = cos[at + i], s = sin[at + i];
            for (int h = 0; h < heads; h++) {
                int b = off + h * headDim;
                float x1 = x[b + j], x2 = x[b + j + half];
                x[b + j] = x1 * c - x2 * s;
                x[b + j + half] = x2 * c + x1 * s;
            }
        }
    }
}
