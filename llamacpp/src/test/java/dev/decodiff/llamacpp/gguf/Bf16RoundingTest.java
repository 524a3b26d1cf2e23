package dev.decodiff.llamacpp.gguf;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/** The converter's fp32 → bf16 (metal's BFloat16.round) rounds as gguf-py's quants.py does (values worked out by hand from the bit patterns). */
class Bf16RoundingTest {
    private static int bf16(int f32Bits) { return dev.decodiff.metal.BFloat16.round(Float.intBitsToFloat(f32Bits)) & 0xffff; }

    @Test
    void tiesGoToTheEvenNeighbour() {
        assertThat(bf16(0x3F808000)).as("1 + 2^-8, halfway between 0x3F80 and 0x3F81").isEqualTo(0x3F80);
        assertThat(bf16(0x3F818000)).as("halfway between 0x3F81 and 0x3F82").isEqualTo(0x3F82);
        assertThat(bf16(0x3F808001)).as("just above halfway").isEqualTo(0x3F81);
        assertThat(bf16(0xBF807FFF)).as("just below halfway, negative").isEqualTo(0xBF80);
    }

    @Test
    void bf16ValuesPassUnchangedAndOverflowBecomesInfinity() {
        for (int b : new int[]{0x0000, 0x8000, 0x3F80, 0x0001, 0x7F7F, 0xFF80, 0x7F80})
            assertThat(bf16(b << 16)).as("bf16 %04x", b).isEqualTo(b);
        assertThat(bf16(0x7F7FFFFF)).as("the largest float rounds up to +inf").isEqualTo(0x7F80);
    }

    @Test
    void aNanStaysANanWithItsQuietBitSet() {
        assertThat(bf16(0x7F800001)).as("a signalling NaN whose payload is in the dropped half").isEqualTo(0x7FC0);
        assertThat(bf16(0xFFC00000)).isEqualTo(0xFFC0);
    }
}
