package dev.decodiff.harness.ops;

/**
 * One kernel checked against the oracle: NMSE = Σ(ours − oracle)² / Σ oracle², over every output element, against
 * the op's threshold (docs/ops.md). NaN/Inf in our output is a failure whatever the threshold.
 */
public record OpResult(String op, String kernel, String shape, double nmse, double maxAbsErr, double refRms,
                       double threshold, double seconds) {
    public boolean passed() { return Double.isFinite(nmse) && nmse <= threshold; }

    /** NMSE of ours against the oracle's reference; NaN when ours holds a NaN/Inf. */
    static double[] nmseAndMaxAbs(float[] ours, double[] ref) {
        if (ours.length != ref.length) throw new IllegalStateException("lengths differ: " + ours.length + " vs " + ref.length);
        double num = 0, den = 0, max = 0;
        for (int i = 0; i < ref.length; i++) {
            if (!Float.isFinite(ours[i])) return new double[]{Double.NaN, Double.NaN, Math.sqrt(den / Math.max(1, i))};
            double d = ours[i] - ref[i];
            num += d * d;
            den += ref[i] * ref[i];
            max = Math.max(max, Math.abs(d));
        }
        return new double[]{den == 0 ? (num == 0 ? 0 : Double.POSITIVE_INFINITY) : num / den, max, Math.sqrt(den / ref.length)};
    }
}
