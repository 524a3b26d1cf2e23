package dev.decodiff.engine;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** Sampling against its definitions: greedy is torch.argmax, the filters keep what they promise, seeds repeat. */
class SamplerTest {
    private static final float[] LOGITS = {0.5f, 3.0f, 1.0f, 3.0f, -2.0f, 2.5f};

    @Test
    void greedyIsTheFirstMaximumAsTorchArgmax() {
        assertThat(Sampler.argmax(LOGITS)).isEqualTo(1);
        assertThat(Sampler.greedy().sample(LOGITS)).isEqualTo(1);
        assertThat(Sampler.argmax(new float[]{Float.NaN, 1f, 0f})).isEqualTo(1);
    }

    /**
     * torch.argmax's rule written out (first maximum, NaN never wins; all NaN: the last index) against random vectors
     * of every length around the vector width, with ties, NaNs, infinities and signed zeros planted.
     */
    @Test
    void argmaxIsTheFirstLargestNonNanValueAtEveryLength() {
        var rnd = new java.util.Random(5);
        float[] specials = {Float.NaN, Float.NEGATIVE_INFINITY, Float.POSITIVE_INFINITY, -0f, 0f, 3f};
        for (int n = 1; n < 80; n++)
            for (int rep = 0; rep < 200; rep++) {
                float[] x = new float[n];
                for (int i = 0; i < n; i++) x[i] = rnd.nextInt(4) == 0 ? specials[rnd.nextInt(specials.length)] : rnd.nextInt(7) - 3;
                if (rep % 50 == 0) java.util.Arrays.fill(x, Float.NaN);
                if (rep % 50 == 1) java.util.Arrays.fill(x, Float.NEGATIVE_INFINITY);
                int expected = -1;
                for (int i = 0; i < n; i++) if (!Float.isNaN(x[i]) && (expected < 0 || x[i] > x[expected])) expected = i;
                if (expected < 0) expected = n - 1;
                assertThat(Sampler.argmax(x)).as("n=%d %s", n, java.util.Arrays.toString(x)).isEqualTo(expected);
            }
    }

    @Test
    void topKOneAndATinyTopPAreGreedyWhateverTheTemperature() {
        for (long seed = 0; seed < 50; seed++) {
            assertThat(new Sampler(5f, 1, 1f, seed).sample(LOGITS)).isEqualTo(1);
            assertThat(new Sampler(5f, 0, 1e-6f, seed).sample(LOGITS)).isEqualTo(1);
        }
    }

    @Test
    void topKNeverPicksOutsideTheKBest() {
        for (long seed = 0; seed < 500; seed++) assertThat(new Sampler(10f, 3, 1f, seed).sample(LOGITS)).isIn(1, 3, 5);
    }

    @Test
    void sameSeedSameTokensAndFrequenciesFollowTheSoftmax() {
        var a = new Sampler(1f, 0, 1f, 7);
        var b = new Sampler(1f, 0, 1f, 7);
        int n = 200_000;
        int[] counts = new int[LOGITS.length];
        for (int i = 0; i < n; i++) {
            int t = a.sample(LOGITS);
            assertThat(b.sample(LOGITS)).isEqualTo(t);
            counts[t]++;
        }
        double z = 0;
        for (float l : LOGITS) z += Math.exp(l);
        for (int i = 0; i < LOGITS.length; i++) {
            double p = Math.exp(LOGITS[i]) / z;
            double sigma = Math.sqrt(n * p * (1 - p));
            assertThat((double) counts[i]).as("token %d", i).isCloseTo(n * p, org.assertj.core.data.Offset.offset(5 * sigma + 1));
        }
    }

    @Test
    void badSettingsAreRefused() {
        assertThatThrownBy(() -> new Sampler(-1f, 0, 1f, 0)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new Sampler(1f, 0, 0f, 0)).isInstanceOf(IllegalArgumentException.class);
    }
}
