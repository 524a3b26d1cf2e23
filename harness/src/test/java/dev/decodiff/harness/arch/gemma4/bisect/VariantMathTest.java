package dev.decodiff.harness.arch.gemma4.bisect;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

/** The closed forms the variant detectors recompute with, against published values. */
class VariantMathTest {
    @Test
    void erfMatchesTabulatedValues() {
        // Abramowitz & Stegun table 7.1 / any CAS: erf(0.5), erf(1), erf(2), erf(3.5)
        assertThat(ActivationVariantsDetector.erf(0.5)).isCloseTo(0.5204998778130465, within(1e-13));
        assertThat(ActivationVariantsDetector.erf(1.0)).isCloseTo(0.8427007929497149, within(1e-13));
        assertThat(ActivationVariantsDetector.erf(-2.0)).isCloseTo(-0.9953222650189527, within(1e-13));
        assertThat(ActivationVariantsDetector.erf(3.5)).isCloseTo(0.9999992569016276, within(1e-13));
    }

    @Test
    void exactAndTanhGeluDifferByTheKnownFewTenThousandths() {
        // torch: F.gelu(1.0) = 0.8413447460685429, F.gelu(1.0, approximate="tanh") = 0.8411919906082768
        assertThat(ActivationVariantsDetector.geluErf(1.0)).isCloseTo(0.8413447460685429, within(1e-12));
        assertThat(ActivationVariantsDetector.geluTanh(1.0)).isCloseTo(0.8411919906082768, within(1e-12));
    }

    @Test
    void aScaleStoredInBfloat16KeepsEightSignificantBits() {
        // 1/√512 = 0.0441941738…; bfloat16 keeps 1.0110101 × 2⁻⁵ = 0.044189453125
        assertThat(VariantSearch.bf16((float) (1 / Math.sqrt(512)))).isEqualTo(0.044189453125f);
        assertThat(VariantSearch.bf16(0.0625f)).isEqualTo(0.0625f);
        // 1/√32 = 0.1767766953 → 0.17675781 (the nearest of 0.17578125, 0.17675781, 0.17773438)
        assertThat(VariantSearch.bf16((float) (1 / Math.sqrt(32)))).isEqualTo(0.17675781f);
    }

    @Test
    void attentionScalesListEveryClosedFormAndItsBfloat16RoundingOnlyWhereItDiffers() {
        var s = AttentionVariantsDetector.scales(256);
        assertThat(s).containsKeys("1/√d (d = 256)", "1/d (d = 256)", "√d (d = 256)", "1/√2", "1/√(d/2) (d = 256)");
        assertThat(s.get("1/√d (d = 256)")).isEqualTo(1 / 16.0);
        assertThat(s.keySet()).noneMatch(k -> k.startsWith("1/√d (d = 256) rounded")); // 1/16 is exact in bfloat16
        assertThat(s.keySet()).anyMatch(k -> k.startsWith("1/√2 rounded to bfloat16"));
    }
}
