package dev.decodiff.engine;

/**
 * GELU with the exact normal CDF, x·Φ(x) = ½·x·(1 + erf(x/√2)) — torch's default {@code F.gelu}, which Gemma's
 * {@code gelu_pytorch_tanh} approximates. The engine uses it only under fault mlp-gelu-erf; bisect recomputes it as a
 * variant of the MLP activation.
 */
public final class ExactGelu {
    private ExactGelu() {}

    public static double gelu(double x) { return 0.5 * x * (1 + erf(x / Math.sqrt(2))); }

    /** erf to about 1e-13: its Taylor series below 3, the continued fraction of erfc above (no cancellation there). */
    public static double erf(double z) {
        double a = Math.abs(z);
        double r;
        if (a < 3) {
            double term = a, sum = a, z2 = a * a;
            for (int n = 1; n < 200 && Math.abs(term) > 1e-17 * Math.abs(sum); n++) {
                term *= -z2 / n;
                sum += term / (2 * n + 1);
            }
            r = 2 / Math.sqrt(Math.PI) * sum;
        } else {
            double f = 0;
            for (int n = 60; n >= 1; n--) f = n / 2.0 / (a + f);
            r = 1 - Math.exp(-a * a) / Math.sqrt(Math.PI) / (a + f);
        }
        return z < 0 ? -r : r;
    }
}
