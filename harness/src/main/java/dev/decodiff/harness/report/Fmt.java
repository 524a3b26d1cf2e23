package dev.decodiff.harness.report;

import java.util.Locale;

/** Number formatting shared by the reports: short scientific notation that still reads at 1e-7. */
public final class Fmt {
    private Fmt() {}

    /** 1.2e-7, 9.4e-1, 0, NaN, ∞ — at most 7 characters. */
    public static String rel(double x) {
        if (Double.isNaN(x)) return "NaN";
        if (Double.isInfinite(x)) return "∞";
        if (x == 0) return "0";
        String s = format("%.1e", x);
        int e = s.indexOf('e');
        String mant = s.substring(0, e), exp = s.substring(e + 1);
        int ev = Integer.parseInt(exp);
        return mant + "e" + ev;
    }

    public static String sci(double x) {
        if (Double.isNaN(x)) return "NaN";
        if (Double.isInfinite(x)) return x > 0 ? "∞" : "−∞";
        return format("%.2e", x);
    }

    public static String num(double x, int digits) {
        if (!Double.isFinite(x)) return sci(x);
        return format("%." + digits + "f", x);
    }

    /** Sorted numbers as ranges, each shifted by {@code offset}: "3, 5–9, 12". */
    public static String ranges(java.util.Collection<? extends Number> xs, long offset) {
        var sb = new StringBuilder();
        long start = 0, prev = 0;
        boolean open = false;
        for (var n : xs) {
            long x = n.longValue();
            if (open && x == prev + 1) { prev = x; continue; }
            if (open) appendRange(sb, start + offset, prev + offset);
            start = prev = x;
            open = true;
        }
        if (open) appendRange(sb, start + offset, prev + offset);
        return sb.toString();
    }

    private static void appendRange(StringBuilder sb, long a, long b) {
        if (!sb.isEmpty()) sb.append(", ");
        sb.append(a == b ? Long.toString(a) : a + "–" + b);
    }

    /**
     * {@code String.format} in {@link Locale#ROOT}: everything decodiff prints reads the same on every machine (a German
     * default locale would write 1,5e-07, an Arabic one other digits). Every other formatting call here goes through it.
     */
    public static String format(String pattern, Object... args) { return String.format(Locale.ROOT, pattern, args); }

    public static String count(long n) { return format("%,d", n); }

    public static String percent(double share) {
        if (!Double.isFinite(share)) return "∞%";
        double p = share * 100;
        if (p < 0.1) return "<0.1%";
        if (p < 10) return format("%.1f%%", p);
        return format("%.0f%%", p);
    }

    public static String pad(String s, int w) {
        int len = s.codePointCount(0, s.length());
        return len >= w ? s : s + " ".repeat(w - len);
    }

    public static String padLeft(String s, int w) {
        int len = s.codePointCount(0, s.length());
        return len >= w ? s : " ".repeat(w - len) + s;
    }

    /** Wraps a paragraph at width, indenting every line. */
    public static String wrap(String text, int width, String indent) {
        var sb = new StringBuilder();
        int col = 0;
        for (String word : text.split(" ")) {
            if (word.isEmpty()) continue;
            if (col > 0 && col + 1 + word.length() > width) {
                sb.append('\n');
                col = 0;
            }
            if (col == 0) {
                sb.append(indent);
                col = indent.length();
            } else {
                sb.append(' ');
                col++;
            }
            sb.append(word);
            col += word.length();
        }
        return sb.toString();
    }
}
