package dev.decodiff.engine;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

import java.util.Arrays;
import java.util.SplittableRandom;

/** Picks the next token: greedy (temperature 0) or seeded sampling with temperature, top-k and top-p. */
public final class Sampler {
    private final float temperature;
    private final int topK;
    private final float topP;
    private final SplittableRandom random;

    public Sampler(float temperature, int topK, float topP, long seed) {
        if (temperature < 0) throw new IllegalArgumentException("temperature must be ≥ 0");
        if (topP <= 0 || topP > 1) throw new IllegalArgumentException("top-p must be in (0, 1]");
        this.temperature = temperature;
        this.topK = topK;
        this.topP = topP;
        this.random = new SplittableRandom(seed);
    }

    public static Sampler greedy() { return new Sampler(0f, 0, 1f, 0); }

    /**
     * The index of the largest logit; the first one on ties, as torch.argmax. NaN never wins (all NaN: the last index).
     * Two vector passes (the largest non-NaN value, then its first index) instead of one loop whose every step waits on
     * the last comparison: a greedy decode step of a 262,144-entry vocabulary spent 0.3–0.4 ms there.
     */
    public static int argmax(float[] logits) {
        int n = logits.length, bound = F.loopBound(n), i = 0;
        var vmax = FloatVector.broadcast(F, Float.NEGATIVE_INFINITY);
        for (; i < bound; i += F.length()) {
            var v = FloatVector.fromArray(F, logits, i);
            vmax = vmax.max(v.blend(Float.NEGATIVE_INFINITY, v.test(VectorOperators.IS_NAN)));
        }
        float max = vmax.reduceLanes(VectorOperators.MAX);
        for (; i < n; i++) if (logits[i] > max) max = logits[i];
        var target = FloatVector.broadcast(F, max);
        for (i = 0; i < bound; i += F.length()) {
            var hit = FloatVector.fromArray(F, logits, i).compare(VectorOperators.EQ, target);
            if (hit.anyTrue()) return i + hit.firstTrue();
        }
        for (; i < n; i++) if (logits[i] == max) return i;
        return n - 1; // every logit NaN
    }

    private static final VectorSpecies<Float> F = FloatVector.SPECIES_PREFERRED;

    public int sample(float[] logits) {
        if (temperature == 0f) return argmax(logits);
        int n = logits.length;
        Integer[] order = new Integer[n];
        for (int i = 0; i < n; i++) order[i] = i;
        Arrays.sort(order, (a, b) -> Float.compare(logits[b], logits[a]));
        int keep = topK > 0 ? Math.min(topK, n) : n;
        double max = logits[order[0]];
        double[] p = new double[keep];
        double sum = 0;
        for (int i = 0; i < keep; i++) {
            p[i] = Math.exp((logits[order[i]] - max) / temperature);
            sum += p[i];
        }
        double cum = 0;
        int cut = keep;
        for (int i = 0; i < keep; i++) {
            cum += p[i] / sum;
            if (cum >= topP) { cut = i + 1; break; }
        }
        double total = 0;
        for (int i = 0; i < cut; i++) total += p[i];
        double r = random.nextDouble() * total;
        for (int i = 0; i < cut; i++) {
            r -= p[i];
            if (r <= 0) return order[i];
        }
        return order[cut - 1];
    }
}
