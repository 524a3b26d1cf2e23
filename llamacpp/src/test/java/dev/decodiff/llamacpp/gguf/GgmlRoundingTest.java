package dev.decodiff.llamacpp.gguf;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.lang.foreign.MemorySegment;
import java.util.SplittableRandom;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The rounding bounds a stored matrix must keep to: what ggml's own quantizers (the reference ones decodiff writes
 * with) and the float conversions make is always within them, with room to spare but not much; a row moved, scaled or
 * one value changed by a few steps is not.
 */
class GgmlRoundingTest {
    static final int ROW = 256, ROWS = 24;

    /** Rows of mixed scale, with outliers (the extreme of a block is what its step follows). */
    static float[] weights(long seed) {
        var r = new SplittableRandom(seed);
        var w = new float[ROW * ROWS];
        for (int i = 0; i < w.length; i++) w[i] = (float) (r.nextGaussian() * 0.02 * (1 + i / ROW) * (r.nextInt(50) == 0 ? 6 : 1));
        return w;
    }

    static float[] stored(GgmlType t, float[] w) {
        var out = new float[w.length];
        switch (t) {
            case Q8_0, Q4_0 -> {
                byte[] b = t == GgmlType.Q8_0 ? GgmlQuants.quantizeQ8_0(w, 0, w.length) : GgmlQuants.quantizeQ4_0(w, 0, w.length);
                GgmlQuants.dequantize(t, MemorySegment.ofArray(b), 0, w.length, out, 0);
            }
            case F16 -> { for (int i = 0; i < w.length; i++) out[i] = Float.float16ToFloat(Float.floatToFloat16(w[i])); }
            case BF16 -> { for (int i = 0; i < w.length; i++) out[i] = dev.decodiff.metal.BFloat16.widen(dev.decodiff.metal.BFloat16.round(w[i])); }
            default -> throw new IllegalArgumentException(t.toString());
        }
        return out;
    }

    @ParameterizedTest
    @EnumSource(value = GgmlType.class, names = {"Q8_0", "Q4_0", "F16", "BF16"})
    void whatTheQuantizerWritesIsWithinItsBoundAndNotFarBelowIt(GgmlType t) {
        for (long seed = 1; seed <= 5; seed++) {
            float[] w = weights(seed), s = stored(t, w);
            assertThat(GgmlRounding.check(t, w, s, ROW)).as("%s seed %d", t, seed).isNull();
            // the bound is the format's rounding, not a loose cap: the worst element uses a good part of it
            double worst = 0;
            int bs = t == GgmlType.F16 || t == GgmlType.BF16 ? 1 : 32;
            for (int b = 0; b < w.length / bs; b++) {
                double bound = GgmlRounding.blockBound(t, w, b * bs, bs), diff = 0;
                for (int j = 0; j < bs; j++) diff = Math.max(diff, Math.abs(w[b * bs + j] - s[b * bs + j]));
                worst = Math.max(worst, diff / bound);
            }
            assertThat(worst).as("%s: worst element / bound", t).isBetween(0.4, 1.0);
        }
    }

    @ParameterizedTest
    @EnumSource(value = GgmlType.class, names = {"Q8_0", "Q4_0", "F16", "BF16"})
    void aRowMovedOrScaledOrOneValueChangedIsNot(GgmlType t) {
        float[] w = weights(7), s = stored(t, w);
        float[] swapped = s.clone();
        System.arraycopy(s, 3 * ROW, swapped, 4 * ROW, ROW);
        System.arraycopy(s, 4 * ROW, swapped, 3 * ROW, ROW);
        assertThat(GgmlRounding.check(t, w, swapped, ROW)).startsWith("row 3").contains("over " + t + "'s rounding bound");
        float[] scaled = s.clone();
        for (int j = 0; j < ROW; j++) scaled[10 * ROW + j] *= 1.25f;
        assertThat(GgmlRounding.check(t, w, scaled, ROW)).startsWith("row 10");
        float[] one = s.clone();
        int i = 17 * ROW + 40;
        one[i] += (float) (3 * GgmlRounding.blockBound(t, w, t == GgmlType.F16 || t == GgmlType.BF16 ? i : i / 32 * 32, t == GgmlType.F16 || t == GgmlType.BF16 ? 1 : 32));
        assertThat(GgmlRounding.check(t, w, one, ROW)).startsWith("row 17").contains("(1 of ");
    }

    /**
     * Values down into fp32's subnormals, converted as ggml converts them (ggml_compute_fp32_to_bf16: round to nearest
     * even on the bits, no flush; fp16 by IEEE round to nearest even, as F16C does): still within the bound, where
     * half an ulp is a fixed amount (2⁻¹³⁴ for bf16, 2⁻²⁵ for fp16) rather than a share of the value.
     */
    @ParameterizedTest
    @EnumSource(value = GgmlType.class, names = {"F16", "BF16"})
    void tinyAndSubnormalValuesConvertedAsGgmlDoesAreWithinTheBound(GgmlType t) {
        var r = new SplittableRandom(11);
        float[] w = new float[ROW * 4];
        for (int i = 0; i < w.length; i++) {
            double scale = Math.scalb(1.0, -(t == GgmlType.BF16 ? 120 + r.nextInt(29) : 10 + r.nextInt(20)));
            w[i] = (float) ((r.nextBoolean() ? 1 : -1) * scale * (1 + r.nextDouble()));
        }
        float[] s = new float[w.length];
        for (int i = 0; i < w.length; i++) {
            int u = Float.floatToRawIntBits(w[i]);
            s[i] = t == GgmlType.BF16 ? Float.intBitsToFloat(((u + (0x7fff + ((u >>> 16) & 1))) >>> 16) << 16)
                    : Float.float16ToFloat(Float.floatToFloat16(w[i]));
        }
        long tiny = 0;
        for (float x : w) if (Math.abs(x) < (t == GgmlType.BF16 ? Float.MIN_NORMAL : 0x1p-14f)) tiny++;
        assertThat(tiny).as("values that are fp32 subnormals (bf16) or below fp16's normal range").isGreaterThan(w.length / 10);
        assertThat(GgmlRounding.check(t, w, s, ROW)).isNull();
    }

    @Test
    void aTypeWithoutABoundOrAShapeThatDoesNotFitIsSaidSo() {
        float[] w = weights(3);
        assertThat(GgmlRounding.check(GgmlType.F32, w, w, ROW)).contains("no rounding bound");
        assertThat(GgmlRounding.check(GgmlType.Q8_0, w, new float[3], ROW)).contains("holds 3 values");
        assertThat(GgmlRounding.check(GgmlType.Q4_K, w, w, 96)).contains("no whole number of 256-value blocks");
    }
}
