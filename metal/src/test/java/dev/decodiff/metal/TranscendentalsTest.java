package dev.decodiff.metal;

import org.junit.jupiter.api.Test;

import java.util.SplittableRandom;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The vectorized exp/tanh/gelu against StrictMath (fdlibm, an independent implementation): within one fp32 ulp
 * everywhere, equal bits almost everywhere; and the vector lanes equal the scalar mirror bit for bit, so a tail or a
 * scalar caller never differs from a full vector.
 */
class TranscendentalsTest {
    private static final int SAMPLES = 400_000;

    private static float[] randomFloats(long seed, double scale) {
        var rnd = new SplittableRandom(seed);
        float[] x = new float[SAMPLES];
        for (int i = 0; i < x.length; i++) {
            double mag = switch (i % 4) {
                case 0 -> rnd.nextGaussian() * scale;
                case 1 -> rnd.nextDouble(-12, 12);
                case 2 -> Math.scalb(rnd.nextDouble(-1, 1), rnd.nextInt(-40, 3));
                default -> rnd.nextDouble(-200, 200);
            };
            x[i] = (float) mag;
        }
        return x;
    }

    private static long ulps(float a, float b) {
        if (Float.isNaN(a) || Float.isNaN(b)) return Float.isNaN(a) && Float.isNaN(b) ? 0 : Long.MAX_VALUE;
        int ia = Float.floatToRawIntBits(a), ib = Float.floatToRawIntBits(b);
        long la = ia < 0 ? 0x80000000L - ia : ia, lb = ib < 0 ? 0x80000000L - ib : ib;
        return Math.abs(la - lb);
    }

    @Test
    void expIsWithinFourDoubleUlpsOfStrictMath() {
        var rnd = new SplittableRandom(1);
        for (int i = 0; i < SAMPLES; i++) {
            double y = rnd.nextDouble(-708, 709);
            double want = StrictMath.exp(y), got = Transcendentals.exp(y);
            assertThat(Math.abs(got - want)).as("exp(%s)", y).isLessThanOrEqualTo(4 * Math.ulp(want));
        }
        assertThat(Transcendentals.exp(0)).isEqualTo(1.0);
        assertThat(Transcendentals.exp(Double.NaN)).isNaN();
        assertThat(Transcendentals.exp(Double.NEGATIVE_INFINITY)).isLessThan(1e-307);
    }

    @Test
    void geluMatchesStrictMathToOneUlp() {
        float[] x = randomFloats(2, 3);
        float[] g = x.clone(), ones = new float[x.length];
        java.util.Arrays.fill(ones, 1f);
        Transcendentals.geluTanhTimes(g, ones, 0, g.length);
        int differ = 0;
        for (int i = 0; i < x.length; i++) {
            // x·σ(2u) with fdlibm's exp: the same function as 0.5·x·(1 + tanh u) without its cancellation for x ≪ 0
            double xd = x[i], u = Math.sqrt(2.0 / Math.PI) * (xd + 0.044715 * xd * xd * xd);
            float want = (float) (xd / (1.0 + StrictMath.exp(-2.0 * u)));
            double tanhForm = 0.5 * xd * (1.0 + StrictMath.tanh(u));
            assertThat(Math.abs(g[i] - tanhForm)).as("gelu(%s) vs the tanh form", x[i]).isLessThanOrEqualTo(Math.max(1e-15, 2 * Math.ulp(want)));
            assertThat(ulps(g[i], want)).as("gelu(%s): %s vs %s", x[i], g[i], want).isLessThanOrEqualTo(1);
            assertThat(Float.floatToRawIntBits(Transcendentals.geluTanh(x[i]))).as("scalar gelu(%s)", x[i]).isEqualTo(Float.floatToRawIntBits(g[i]));
            if (g[i] != want) differ++;
        }
        assertThat(differ).as("values one ulp away from the fdlibm formula").isLessThan(SAMPLES / 1000);
    }

    @Test
    void softcapMatchesStrictMathTanhToOneUlp() {
        float cap = 30f;
        float[] x = randomFloats(3, 40);
        float[] y = x.clone();
        Transcendentals.softcap(y, 0, y.length, cap);
        for (int i = 0; i < x.length; i++) {
            float want = (float) StrictMath.tanh(x[i] / cap) * cap;
            assertThat(ulps(y[i], want)).as("softcap(%s): %s vs %s", x[i], y[i], want).isLessThanOrEqualTo(1);
            assertThat(Float.floatToRawIntBits((float) Transcendentals.tanh(x[i] / cap) * cap)).isEqualTo(Float.floatToRawIntBits(y[i]));
        }
        float[] special = {Float.NaN, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, -0f, 0f, Float.MIN_VALUE, -1e-30f, 1e30f};
        float[] s = special.clone();
        Transcendentals.softcap(s, 0, s.length, cap);
        assertThat(s[0]).isNaN();
        assertThat(s[1]).isEqualTo(cap);
        assertThat(s[2]).isEqualTo(-cap);
        assertThat(Float.floatToRawIntBits(s[3])).isEqualTo(Float.floatToRawIntBits(-0f));
        assertThat(Float.floatToRawIntBits(s[4])).isZero();
        assertThat(s[6]).isEqualTo((float) StrictMath.tanh(-1e-30f / cap) * cap);
        assertThat(s[7]).isEqualTo(cap);
    }

    @Test
    void shiftedExpMatchesStrictMathToOneUlpAndVectorEqualsScalar() {
        float[] x = randomFloats(4, 10);
        float max = 250f;
        float[] v = x.clone();
        Transcendentals.expShifted(v, 0, v.length, max);
        float[] tail = x.clone();
        Transcendentals.expShifted(tail, 3, 5, max); // shorter than a vector: the scalar path only
        for (int i = 0; i < x.length; i++) {
            float want = (float) StrictMath.exp(x[i] - max);
            assertThat(ulps(v[i], want)).as("exp(%s - %s)", x[i], max).isLessThanOrEqualTo(1);
            if (i >= 3 && i < 8) assertThat(Float.floatToRawIntBits(tail[i])).isEqualTo(Float.floatToRawIntBits(v[i]));
        }
    }

    @Test
    void siluMatchesStrictMathToOneUlpAndVectorEqualsScalar() {
        float[] x = randomFloats(5, 6);
        float[] out = new float[x.length + 3];
        Transcendentals.silu(x, 0, x.length, out, 3);
        float[] inPlace = x.clone();
        Transcendentals.silu(inPlace, 1, x.length - 1, inPlace, 1); // aliased, starting off a vector boundary
        float[] g = x.clone(), u = randomFloats(6, 2);
        Transcendentals.siluTimes(g, u, 2, x.length - 5); // a head and a tail outside the range stay untouched
        int differ = 0;
        for (int i = 0; i < x.length; i++) {
            float want = x[i] / (1f + (float) StrictMath.exp(-(double) x[i]));
            int scalar = Float.floatToRawIntBits(Transcendentals.silu(x[i]));
            assertThat(ulps(out[i + 3], want)).as("silu(%s): %s vs %s", x[i], out[i + 3], want).isLessThanOrEqualTo(1);
            assertThat(Float.floatToRawIntBits(out[i + 3])).as("vector silu(%s) = scalar", x[i]).isEqualTo(scalar);
            if (i >= 1) assertThat(Float.floatToRawIntBits(inPlace[i])).as("in place silu(%s)", x[i]).isEqualTo(scalar);
            float swiglu = i >= 2 && i < x.length - 5 ? Transcendentals.silu(x[i]) * u[i] : x[i];
            assertThat(Float.floatToRawIntBits(g[i])).as("siluTimes at %d", i).isEqualTo(Float.floatToRawIntBits(swiglu));
            if (out[i + 3] != want) differ++;
        }
        assertThat(inPlace[0]).isEqualTo(x[0]);
        assertThat(differ).as("values one ulp away from the fdlibm formula").isLessThan(SAMPLES / 1000);
        float[] special = {Float.NaN, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, -0f, 0f, 1e-40f, -200f, 200f, -1e-30f};
        float[] s = new float[special.length];
        Transcendentals.silu(special, 0, special.length, s, 0);
        assertThat(s[0]).isNaN();
        assertThat(s[1]).isEqualTo(Float.POSITIVE_INFINITY);
        assertThat(s[2]).as("silu(-inf): -inf / inf, as x·sigmoid(x) = -inf · 0 is in torch").isNaN();
        assertThat(Float.floatToRawIntBits(s[3])).isEqualTo(Float.floatToRawIntBits(-0f));
        assertThat(Float.floatToRawIntBits(s[4])).isZero();
        assertThat(s[5]).as("a subnormal is not flushed").isEqualTo(1e-40f / 2f).isNotZero();
        assertThat(Float.floatToRawIntBits(s[6])).isEqualTo(Float.floatToRawIntBits(-0f));
        assertThat(s[7]).isEqualTo(200f);
        assertThat(s[8]).isEqualTo(-1e-30f / 2f);
        for (int i = 0; i < special.length; i++)
            assertThat(Float.floatToRawIntBits(s[i])).as("special %s", special[i]).isEqualTo(Float.floatToRawIntBits(Transcendentals.silu(special[i])));
    }
}
