package dev.decodiff.engine;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The rotation written out from its definition — angle = float(p)·inv_freq[j] in fp32, cos and sin of it, the pair
 * (j, j + d/2) rotated, pass-through pairs (angle 0) left as they are — against Rope.apply at every position, on its
 * own (one position's cos/sin at a time) and after prepare() computed a multi-token step's rotations, including the
 * run's first position 0 and positions outside the run.
 */
class RopeTest {
    @ParameterizedTest(name = "{0} θ={1} d={2}")
    @CsvSource({"default,10000,256,1.0", "proportional,1000000,512,0.25", "default,10000,64,1.0"})
    void everyPathRotatesAsTheDefinition(String type, double theta, int d, double partial) {
        var spec = type.equals("default") ? RopeSpec.defaultRope(theta) : RopeSpec.proportional(theta, partial, 1.0);
        float[] inv = new Rope(spec, d).invFreq();
        var alone = new Rope(spec, d);
        var prepared = new Rope(spec, d);
        prepared.prepare(0, 300);
        var rnd = new Random(d);
        int heads = 3;
        for (int pos = 0; pos < 340; pos++) {
            float[] x = new float[heads * d];
            for (int i = 0; i < x.length; i++) x[i] = (float) rnd.nextGaussian();
            x[5] = -0f; // a signed zero where a pass-through or a zero angle must leave it
            float[] expected = x.clone();
            int half = d / 2;
            for (int j = 0; j < half; j++) {
                float angle = (float) pos * inv[j];
                if (angle == 0f) continue;
                float c = (float) StrictMath.cos(angle), s = (float) StrictMath.sin(angle);
                for (int h = 0; h < heads; h++) {
                    int b = h * d;
                    float x1 = x[b + j], x2 = x[b + j + half];
                    expected[b + j] = x1 * c - x2 * s;
                    expected[b + j + half] = x2 * c + x1 * s;
                }
            }
            float[] a = x.clone(), p = x.clone();
            alone.apply(a, 0, heads, pos);
            prepared.apply(p, 0, heads, pos);
            assertThat(a).as("position %d, one at a time", pos).containsExactly(expected);
            assertThat(p).as("position %d, after prepare(0, 300)", pos).containsExactly(expected);
        }
    }
}
