package dev.decodiff.harness.bench;

import dev.decodiff.engine.KvType;
import org.junit.jupiter.api.Test;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.function.Supplier;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A bench report reads the same whatever the JVM's default locale: a German one would write 14,40 tok/s and 262.144,
 * an Arabic one other digits, into the text report and into the cache folder's name (which would then miss the
 * checkpoint synthesized under another locale).
 */
class BenchLocaleTest {

    @Test
    void theReportTextJsonAndCacheKeyReadTheSameUnderAGermanOrArabicDefaultLocale() {
        var report = report();
        Supplier<String> text = () -> {
            var w = new StringWriter();
            report.print(new PrintWriter(w, true));
            return w.toString();
        };
        Supplier<String> json = () -> report.json().toPrettyString();
        Supplier<String> key = () -> BenchSpec.E2B.key() + " " + BenchSpec.MOE_26B_A4B.key();
        Supplier<String> describe = () -> BenchSpec.E2B.describe();
        var parts = java.util.List.of(new CompareRss.Part("prefill", 1012.25, 1900.5), new CompareRss.Part("observer_check", 98.5, 190.25));
        var usage = new CompareRss.Usage(1234.5, 2345.75, 1.5, "3.10 2.50 2.00 → 3.50 2.75 2.10", parts, 6_543_210_000L, 6_500_000_000L, 4_612_345_000L, 1_234_500L, 41_000_000L, 1_850_000_000L,
                12_582_912L, 2_100_000_000L, 1_650_000_000L, 310_000_000L, 6_320_000_000L);
        var rss = new CompareRss(4096, 10_250_000_000L, true, "none", usage, usage);
        Supplier<String> rssText = () -> {
            var w = new StringWriter();
            rss.print(BenchSpec.E2B, new PrintWriter(w, true));
            return w.toString() + rss.json(BenchSpec.E2B).toPrettyString();
        };
        var before = Locale.getDefault();
        try {
            Locale.setDefault(Locale.ROOT);
            String t = text.get(), j = json.get(), k = key.get(), d = describe.get(), r = rssText.get();
            // the ROOT rendering is the plain one the docs show: a point for decimals, commas between thousands
            assertThat(t).contains("  decode @ctx 512           14.40  (min   13.25, max   15.75, n=8) tok/s");
            assertThat(t).contains("… over the read pass of its own round    0.94  (min  0.88, max  1.06, n=8)");
            assertThat(j).contains("\"decode_128_over_round_read_pass\" : 0.9375");
            assertThat(d).contains("vocab 262,144");
            assertThat(k).contains("-v262144-");
            assertThat(r).contains("a 4,096-token prompt").contains("peak RSS   6.54 GB")
                    .contains("prefill                     1012.3 s wall  1900.5 CPU-s   81.0 % of the CPU time");
            for (var l : new Locale[]{Locale.GERMANY, Locale.forLanguageTag("ar-EG"), Locale.forLanguageTag("hi-IN-u-nu-deva")}) {
                Locale.setDefault(l);
                assertThat(text.get()).as("text in %s", l).isEqualTo(t);
                assertThat(json.get()).as("JSON in %s", l).isEqualTo(j);
                assertThat(key.get()).as("cache key in %s", l).isEqualTo(k);
                assertThat(describe.get()).as("model description in %s", l).isEqualTo(d);
                assertThat(rssText.get()).as("compare RSS report in %s", l).isEqualTo(r);
            }
        } finally {
            Locale.setDefault(before);
        }
    }

    /** Every section of the report filled, each figure with a fraction so a decimal comma would show. */
    private static BenchReport report() {
        var decode = new LinkedHashMap<Integer, Figure>();
        decode.put(128, new Figure(13.8, 14.8, 15.2, 8));
        decode.put(512, new Figure(13.25, 14.4, 15.75, 8));
        decode.put(2048, new Figure(13.4, 13.8, 14.05, 8));
        Map<KvType, Long> bytes = new LinkedHashMap<>();
        Map<KvType, Figure> prefill = new LinkedHashMap<>(), kvDecode = new LinkedHashMap<>(), overF32 = new LinkedHashMap<>();
        long b = 36864;
        for (var t : KvType.values()) {
            bytes.put(t, b);
            b /= 2;
            prefill.put(t, new Figure(101.5, 106.25, 112.5, 3));
            kvDecode.put(t, new Figure(11.5, 14.125, 19.25, 16));
            overF32.put(t, new Figure(0.875, 1.0625, 1.375, 16));
        }
        var rounds = new AgainstLlamaCpp.Rounds(Map.of(128, new double[]{13.5, 14.25}, 512, new double[]{13.5, 13.75}, 2048, new double[]{12.5, 12.75}),
                new double[]{104.5, 103.25});
        var theirs = new AgainstLlamaCpp.Rounds(Map.of(128, new double[]{16.5, 16.75}, 512, new double[]{13.5, 13.25}, 2048, new double[]{14.5, 14.25}),
                new double[]{96.5, 95.25});
        var theirsFlashOff = new AgainstLlamaCpp.Rounds(Map.of(128, new double[]{16.25, 16.5}, 512, new double[]{13.75, 13.5}, 2048, new double[]{15.5, 15.25}),
                new double[]{90.5, 89.25});
        return new BenchReport(BenchSpec.DEFAULT, new Machine("AMD EPYC 9R14, 2 cpus", 2, "native avx512 (FFM)"), 2_117_000_000L,
                new ReadBandwidth(new Figure(20.5, 22.25, 24.75, 7), new Figure(27.9, 29.8, 32.8, 7), new Figure(21.5, 23.5, 25.5, 7), new Figure(18.7, 25.6, 27.6, 7), 512L << 20, true, "resident in anonymous memory on huge pages (2.12 GB copied from the checkpoint files)"),
                new Compute(new Figure(211.5, 224.25, 232.5, 3), new Figure(158.5, 176.25, 180.5, 3), "512×1536 · 1536×6144",
                        new Figure(6100.5, 6200.25, 6230.5, 3), new Figure(400.5, 420.25, 440.5, 3), new Figure(800.5, 820.25, 840.5, 3),
                        new Figure(2.25, 2.5, 2.75, 3), new Figure(4.25, 4.5, 4.75, 3)),
                new Figure(103.5, 105.25, 107.75, 3), new Decode(new Figure(20.375, 20.375, 20.375, 1), decode, new Figure(30.5, 33.25, 36.75, 8),
                        Map.of(128, new Figure(0.875, 0.9375, 1.0625, 8), 512, new Figure(0.8125, 0.9125, 1.0125, 8), 2048, new Figure(0.8, 0.9, 1.0, 8))),
                new CaptureOverhead(new Figure(76.5, 88.25, 111.5, 8), new Figure(74.5, 92.25, 118.5, 8), new Figure(133.5, 159.25, 170.5, 8), 71_500_000L),
                new PrefixReuse(new Figure(0.565, 0.575, 0.605, 3), new Figure(0.5625, 0.5725, 0.5775, 3)),
                new KvTypes(bytes, prefill, Map.of(512, kvDecode, 2048, kvDecode), Map.of(512, overF32, 2048, overF32)),
                new CompareThroughput(new Figure(14.05, 15.95, 18.15, 5), new Figure(1.55, 1.55, 1.55, 1)),
                5_970_000_000L, new Figure(158.5, 159.25, 163.5, 3),
                new AgainstLlamaCpp("llama.cpp v0.5.0", "prebuilt (node-llama-cpp 3.22.1)", "libggml-cpu-zen4.so", true, 2, rounds, theirs, theirsFlashOff, new double[]{150.5, 155.25}, rounds, theirs, theirs),
                new OneShot(new Figure(61.5, 78.25, 80.5, 3), new Figure(98.5, 101.25, 104.5, 3), new Figure(1.25, 1.295, 1.625, 3),
                        new Figure(9.5, 10.25, 12.75, 3), new Figure(1.5, 1.625, 2.25, 3), true), new Figure(80.5, 84.25, 86.5, 3), new Figure(1.25, 1.5, 1.75, 3));
    }
}
