package dev.decodiff.harness.compare.detect;

import dev.decodiff.engine.CapturePoints;

import java.util.Locale;

/** How findings write numbers and name what an equality between two capture points means. */
public final class Wording {
    private Wording() {}

    public static String sci(double x) { return String.format(Locale.ROOT, "%.2e", x); }

    public static String factor(double x) {
        return String.format(Locale.ROOT, Math.abs(x) >= 100 || Math.abs(x) < 0.01 ? "%.4g" : "%.4f", x)
                .replaceAll("(\\.\\d*?)0+$", "$1").replaceAll("\\.$", "");
    }

    public static String norm(double x) { return String.format(Locale.ROOT, "%.2f", x); }

    /** 30 for 30.0, 30.5 for 30.5. */
    public static String plain(double x) { return x == Math.rint(x) ? Long.toString((long) x) : Double.toString(x); }

    /** What "the candidate's {@code pk} equals the reference's {@code qk}" means, or "" when nothing specific. */
    static String meaning(String pk, String qk) {
        return switch (pk + "=" + qk) {
            case CapturePoints.V_READ + "=" + CapturePoints.K_READ -> ": the values read back from the cache are the keys (the cache hands back keys as values)";
            case CapturePoints.K_READ + "=" + CapturePoints.V_READ -> ": the keys read back from the cache are the values";
            case CapturePoints.V + "=" + CapturePoints.K -> ": the values entering the cache are the keys";
            case CapturePoints.K + "=" + CapturePoints.V -> ": the keys entering the cache are the values";
            case CapturePoints.K + "=" + CapturePoints.Q, CapturePoints.Q + "=" + CapturePoints.K -> ": queries and keys are mixed up";
            case CapturePoints.OUT + "=" + CapturePoints.ATTN_OUT, CapturePoints.OUT + "=" + CapturePoints.MLP_OUT,
                 CapturePoints.OUT + "=" + CapturePoints.MOE_OUT -> ": the layer's output skips the residual stream";
            default -> "";
        };
    }

    /**
     * A finding "the candidate's pk is the reference's qk": with what that means, and — when it means something —
     * the variant "tensor wiring / pk is qk".
     */
    static Finding wired(String head, String pk, String qk) {
        String meaning = meaning(pk, qk);
        return meaning.isEmpty() ? Finding.of(head) : Finding.variant("tensor wiring", pk + " is " + qk, head + meaning);
    }

    /**
     * Names factors that usually mean something: √n or 1/√n for small n and for powers of two (a missing or doubled
     * attention scale √d, an embedding scale √H). Only numbers sparse enough that a match is not a coincidence.
     */
    public static String namedFactor(double a) {
        double abs = Math.abs(a);
        if (abs < 1e-12) return "";
        String sign = a < 0 ? "−" : "";
        var ns = new java.util.TreeSet<Integer>();
        for (int n = 2; n <= 16; n++) ns.add(n);
        for (int n = 32; n <= 1 << 16; n <<= 1) ns.add(n);
        for (int n : ns) {
            double root = Math.sqrt(n);
            boolean isSquare = Math.rint(root) == root;
            if (Math.abs(abs - root) / root < 1e-3) return isSquare ? "" : " = " + sign + "√" + n;
            if (Math.abs(abs * root - 1) < 1e-3) return isSquare ? " = " + sign + "1/" + (int) root : " = " + sign + "1/√" + n;
        }
        return "";
    }
}
