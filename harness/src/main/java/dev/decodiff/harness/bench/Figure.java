package dev.decodiff.harness.bench;

import dev.decodiff.harness.report.Fmt;

import java.util.Arrays;

/** Repeated measurements of one quantity: min, median and max over the samples. */
public record Figure(double min, double median, double max, int samples) {
    public static Figure of(double... v) {
        if (v.length == 0) throw new IllegalArgumentException("no samples");
        double[] s = v.clone();
        Arrays.sort(s);
        int n = s.length;
        double med = n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
        return new Figure(s[0], med, s[n - 1], n);
    }

    /** Rates from times: each sample work/seconds. */
    public static Figure rates(double work, double[] seconds) {
        double[] r = new double[seconds.length];
        for (int i = 0; i < r.length; i++) r[i] = work / seconds[i];
        return of(r);
    }

    public Figure times(double k) { return new Figure(min * k, median * k, max * k, samples); }

    public String format(String fmt) {
        return Fmt.format(fmt + "  (min " + fmt + ", max " + fmt + ", n=%d)", median, min, max, samples);
    }
}
