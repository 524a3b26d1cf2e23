package dev.decodiff.harness.live;

import dev.decodiff.harness.report.Fmt;

/** How a live run checks the probes' observer effect: the same step re-run without probes must give the same logits. */
public enum ObserverCheck {
    /** Not at all. */
    OFF,
    /** A step longer than {@link #REPLAYED} positions re-runs only its last ones without probes; shorter steps whole. */
    LAST_POSITIONS,
    /** Every step re-run whole without probes. */
    WHOLE;

    /** Positions at the end of a longer step that the observer check re-runs without probes. */
    public static final int REPLAYED = 256;

    /** "none" where the logits with probes are bit-identical to those without; else where and how much they differ. */
    public static String observerDifference(int step, float[] base, float[] probed) {
        if (base.length != probed.length) return "logits length differs at step " + step;
        int differing = 0;
        double max = 0;
        for (int i = 0; i < base.length; i++) {
            if (Float.floatToRawIntBits(base[i]) != Float.floatToRawIntBits(probed[i])) {
                differing++;
                max = Math.max(max, Math.abs((double) base[i] - probed[i]));
            }
        }
        if (differing == 0) return "none";
        return Fmt.format("logits with probes differ from logits without at step %d (%d of %d values, max |Δ| %.3g)",
                step, differing, base.length, max);
    }
}
