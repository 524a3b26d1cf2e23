package dev.decodiff.engine;

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

    /** The index of the largest logit; the first one on ties, as torch.argmax. NaN never wins. */
    public static int argmax(float[] logits) {
        int best = 0;
        for (int i = 1; i < logits.length; i++) if (logits[i] > logits[best] || Float.isNaN(logits[best])) best = i;
        return best;
    }

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
