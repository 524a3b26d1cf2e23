package dev.decodiff.engine;

/** RoPE parameters of one layer type: "default" (every pair rotates) or "proportional" (a leading fraction rotates). */
public record RopeSpec(String type, double theta, double partialRotaryFactor, double factor) {
    public static RopeSpec defaultRope(double theta) { return new RopeSpec("default", theta, 1.0, 1.0); }

    public static RopeSpec proportional(double theta, double partial, double factor) {
        return new RopeSpec("proportional", theta, partial, factor);
    }

    @Override
    public String toString() {
        String t = String.format(java.util.Locale.ROOT, "%s θ=%s", type, theta >= 1e5 ? String.format(java.util.Locale.ROOT, "%.0e", theta) : String.format(java.util.Locale.ROOT, "%.0f", theta));
        if (type.equals("proportional")) t += ", partial_rotary_factor " + partialRotaryFactor + (factor != 1.0 ? ", factor " + factor : "");
        return t;
    }
}
