package dev.decodiff.engine;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/** The KV storage formats against their definitions (llama.cpp's q8_0/q4_0 block formulas, torch's bf16 cast). */
class KvRowsTest {
    private static float[] roundTrip(KvType type, float[] row) {
        var rows = KvRows.create(type, row.length, 1);
        rows.write(0, row, 0);
        var out = new float[row.length];
        rows.read(0, out, 0);
        return out;
    }

    @Test
    void q8BlockUsesMaxAbsOver127() {
        var row = new float[32];
        for (int i = 0; i < 32; i++) row[i] = (i - 10) * 0.1f; // max |x| = 2.1
        var back = roundTrip(KvType.Q8_0, row);
        float d = Float.float16ToFloat(Float.floatToFloat16(2.1f / 127f));
        for (int i = 0; i < 32; i++) assertThat(back[i]).isEqualTo(Math.round(row[i] / (2.1f / 127f)) * d);
    }

    @Test
    void q4BlockUsesSignedMaxOverMinus8() {
        var row = new float[32];
        for (int i = 0; i < 32; i++) row[i] = (i % 2 == 0 ? 1 : -1) * i * 0.05f; // largest magnitude −1.55 at i=31
        var back = roundTrip(KvType.Q4_0, row);
        float d = -1.55f / -8f;
        float dh = Float.float16ToFloat(Float.floatToFloat16(d));
        for (int i = 0; i < 32; i++) {
            int q = Math.min(15, (int) (row[i] * (1f / d) + 8.5f));
            assertThat(back[i]).isEqualTo((q - 8) * dh);
        }
        assertThat(back[31]).isCloseTo(-1.55f, org.assertj.core.data.Offset.offset(1e-3f));
    }

    @Test
    void bf16RoundsToNearestEven() {
        float[] row = {1.0f, Float.intBitsToFloat(0x3f808000), Float.intBitsToFloat(0x3f818000), Float.intBitsToFloat(0x3f808001), -0.0f};
        var back = roundTrip(KvType.BF16, row);
        assertThat(back[0]).isEqualTo(1.0f);
        assertThat(Float.floatToRawIntBits(back[1])).isEqualTo(0x3f800000); // tie → even
        assertThat(Float.floatToRawIntBits(back[2])).isEqualTo(0x3f820000); // tie → even (up)
        assertThat(Float.floatToRawIntBits(back[3])).isEqualTo(0x3f810000); // above the tie → up
        assertThat(Float.floatToRawIntBits(back[4])).isEqualTo(0x80000000);
    }

    @Test
    void wideRowsDecodeExactlyAsTheScalarDefinitions() {
        var rnd = new java.util.SplittableRandom(3);
        var row = new float[96]; // vector body and, for bf16, whole 16-lane chunks; the q8 blocks of 32
        for (int i = 0; i < row.length; i++) row[i] = (float) (rnd.nextGaussian() * Math.pow(10, rnd.nextInt(-3, 3)));
        var bf = roundTrip(KvType.BF16, row);
        for (int i = 0; i < row.length; i++)
            assertThat(Float.floatToRawIntBits(bf[i])).isEqualTo((dev.decodiff.metal.BFloat16.round(row[i]) & 0xffff) << 16);
        var q8 = roundTrip(KvType.Q8_0, row);
        for (int b = 0; b < row.length / 32; b++) {
            float amax = 0;
            for (int i = 0; i < 32; i++) amax = Math.max(amax, Math.abs(row[b * 32 + i]));
            float d = amax / 127f, id = 1f / d, dh = Float.float16ToFloat(Float.floatToFloat16(d));
            for (int i = 0; i < 32; i++) assertThat(q8[b * 32 + i]).isEqualTo((byte) Math.round(row[b * 32 + i] * id) * dh);
        }
        var q4 = roundTrip(KvType.Q4_0, row);
        for (int b = 0; b < row.length / 32; b++) {
            float amax = 0, max = 0;
            for (int i = 0; i < 32; i++)
                if (Math.abs(row[b * 32 + i]) > amax) { amax = Math.abs(row[b * 32 + i]); max = row[b * 32 + i]; }
            float d = max / -8f, id = 1f / d, dh = Float.float16ToFloat(Float.floatToFloat16(d));
            for (int i = 0; i < 32; i++) assertThat(q4[b * 32 + i]).isEqualTo((Math.min(15, (int) (row[b * 32 + i] * id + 8.5f)) - 8) * dh);
        }
    }

    @Test
    void bytesPerRowMatchTheBlockLayouts() {
        assertThat(KvType.F32.bytesPerRow(64)).isEqualTo(256);
        assertThat(KvType.BF16.bytesPerRow(64)).isEqualTo(128);
        assertThat(KvType.Q8_0.bytesPerRow(64)).isEqualTo(2 * 34);
        assertThat(KvType.Q4_0.bytesPerRow(64)).isEqualTo(2 * 18);
    }
}
