package dev.decodiff.llamacpp.gguf;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * ggml's block quantizations, as ggml-common.h lays the blocks out and ggml-quants.c computes them: dequantization
 * of Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K to fp32 (operation for operation, so the floats are ggml's
 * own), and the reference quantizers of Q8_0 and Q4_0 (quantize_row_*_ref: what a model file is written with).
 * llama.cpp's quantizer writes the 32-value types wherever a K-quant's 256-value super-block does not fit a row.
 *
 * <ul>
 * <li>Q8_0, 32 values in 34 bytes: fp16 d, 32 × int8 q; x = q·d.
 * <li>Q4_0, 32 values in 18 bytes: fp16 d, 16 bytes of nibbles (low nibble of byte j is value j, high nibble value
 *     j + 16); x = (q − 8)·d.
 * <li>Q4_1, 32 values in 20 bytes: fp16 d, fp16 m, 16 bytes of nibbles as Q4_0; x = q·d + m.
 * <li>Q5_0, 32 values in 22 bytes: fp16 d, 4 bytes of fifth bits (bit j of the little-endian word for value j),
 *     16 bytes of nibbles as Q4_0; x = (q − 16)·d.
 * <li>Q5_1, 32 values in 24 bytes: fp16 d, fp16 m, fifth bits and nibbles as Q5_0; x = q·d + m.
 * <li>Q4_K, 256 values in 144 bytes: fp16 d, fp16 dmin, 12 bytes of eight 6-bit (scale, min) pairs, 128 bytes of
 *     nibbles; per 64 values the low nibbles of 32 bytes then their high nibbles; x = d·sc·q − dmin·m.
 * <li>Q5_K, 256 values in 176 bytes: as Q4_K with 32 bytes of fifth bits between the scales and the nibbles (bit
 *     2i of byte l for value l of the i-th 64-value run's low half, bit 2i+1 for its high half).
 * <li>Q6_K, 256 values in 210 bytes: 128 bytes of low nibbles, 64 bytes of 2-bit high parts, 16 × int8 scales, fp16
 *     d; per 128 values four runs of 32; x = d·sc·(q − 32).
 * </ul>
 */
public final class GgmlQuants {
    private GgmlQuants() {}

    private static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /** The types {@link #dequantize} reads, for messages. */
    public static final String SUPPORTED = "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K";

    /** Whether {@link #dequantize} reads this type. */
    public static boolean dequantizes(GgmlType t) {
        return switch (t) {
            case F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K -> true;
            default -> false;
        };
    }

    /** {@code n} values (whole blocks) of type {@code t} starting at byte {@code off} of {@code src} into {@code out[o ..]}. */
    public static void dequantize(GgmlType t, MemorySegment src, long off, long n, float[] out, int o) {
        switch (t) {
            case F32 -> MemorySegment.copy(src, ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), off, out, o, (int) n);
            case F16 -> { for (int i = 0; i < n; i++) out[o + i] = Float.float16ToFloat(src.get(I16, off + 2L * i)); }
            case BF16 -> { for (int i = 0; i < n; i++) out[o + i] = Float.intBitsToFloat((src.get(I16, off + 2L * i) & 0xffff) << 16); }
            case Q8_0 -> { for (long b = 0; b < n / 32; b++) q8_0(src, off + b * 34, out, o + (int) b * 32); }
            case Q4_0 -> { for (long b = 0; b < n / 32; b++) q4_0(src, off + b * 18, out, o + (int) b * 32); }
            case Q4_1 -> { for (long b = 0; b < n / 32; b++) q4_1(src, off + b * 20, out, o + (int) b * 32); }
            case Q5_0 -> { for (long b = 0; b < n / 32; b++) q5_0(src, off + b * 22, out, o + (int) b * 32); }
            case Q5_1 -> { for (long b = 0; b < n / 32; b++) q5_1(src, off + b * 24, out, o + (int) b * 32); }
            case Q4_K -> { for (long b = 0; b < n / 256; b++) q4_K(src, off + b * 144, out, o + (int) b * 256); }
            case Q5_K -> { for (long b = 0; b < n / 256; b++) q5_K(src, off + b * 176, out, o + (int) b * 256); }
            case Q6_K -> { for (long b = 0; b < n / 256; b++) q6_K(src, off + b * 210, out, o + (int) b * 256); }
            default -> throw new IllegalArgumentException("cannot dequantize " + t + " (supported: " + SUPPORTED + ")");
        }
    }

    private static int u8(MemorySegment s, long i) { return s.get(ValueLayout.JAVA_BYTE, i) & 0xff; }

    private static float half(MemorySegment s, long i) { return Float.float16ToFloat(s.get(I16, i)); }

    private static void q8_0(MemorySegment s, long b, float[] y, int o) {
        float d = half(s, b);
        for (int j = 0; j < 32; j++) y[o + j] = s.get(ValueLayout.JAVA_BYTE, b + 2 + j) * d;
    }

    private static void q4_0(MemorySegment s, long b, float[] y, int o) {
        float d = half(s, b);
        for (int j = 0; j < 16; j++) {
            int q = u8(s, b + 2 + j);
            y[o + j] = ((q & 0x0F) - 8) * d;
            y[o + j + 16] = ((q >>> 4) - 8) * d;
        }
    }

    private static void q4_1(MemorySegment s, long b, float[] y, int o) {
        float d = half(s, b), m = half(s, b + 2);
        for (int j = 0; j < 16; j++) {
            int q = u8(s, b + 4 + j);
            y[o + j] = (q & 0x0F) * d + m;
            y[o + j + 16] = (q >>> 4) * d + m;
        }
    }

    private static void q5_0(MemorySegment s, long b, float[] y, int o) {
        float d = half(s, b);
        int qh = s.get(I32, b + 2);
        for (int j = 0; j < 16; j++) {
            int q = u8(s, b + 6 + j);
            y[o + j] = (((q & 0x0F) | (((qh >>> j) << 4) & 0x10)) - 16) * d;
            y[o + j + 16] = (((q >>> 4) | ((qh >>> (j + 12)) & 0x10)) - 16) * d;
        }
    }

    private static void q5_1(MemorySegment s, long b, float[] y, int o) {
        float d = half(s, b), m = half(s, b + 2);
        int qh = s.get(I32, b + 4);
        for (int j = 0; j < 16; j++) {
            int q = u8(s, b + 8 + j);
            y[o + j] = ((q & 0x0F) | (((qh >>> j) << 4) & 0x10)) * d + m;
            y[o + j + 16] = ((q >>> 4) | ((qh >>> (j + 12)) & 0x10)) * d + m;
        }
    }

    private static void q5_K(MemorySegment s, long b, float[] y, int o) {
        float d = half(s, b), min = half(s, b + 2);
        long sc = b + 4, qh = b + 16, q = b + 48;
        int is = 0, u1 = 1, u2 = 2;
        for (int j = 0; j < 256; j += 64) {
            float d1 = d * scale(s, sc, is), m1 = min * mins(s, sc, is);
            float d2 = d * scale(s, sc, is + 1), m2 = min * mins(s, sc, is + 1);
            for (int l = 0; l < 32; l++) y[o++] = d1 * ((u8(s, q + l) & 0xF) + ((u8(s, qh + l) & u1) != 0 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++) y[o++] = d2 * ((u8(s, q + l) >>> 4) + ((u8(s, qh + l) & u2) != 0 ? 16 : 0)) - m2;
            q += 32;
            is += 2;
            u1 <<= 2;
            u2 <<= 2;
        }
    }

    private static void q4_K(MemorySegment s, long b, float[] y, int o) {
        float d = half(s, b), min = half(s, b + 2);
        long sc = b + 4, q = b + 16;
        int is = 0;
        for (int j = 0; j < 256; j += 64) {
            float d1 = d * scale(s, sc, is), m1 = min * mins(s, sc, is);
            float d2 = d * scale(s, sc, is + 1), m2 = min * mins(s, sc, is + 1);
            for (int l = 0; l < 32; l++) y[o++] = d1 * (u8(s, q + l) & 0xF) - m1;
            for (int l = 0; l < 32; l++) y[o++] = d2 * (u8(s, q + l) >>> 4) - m2;
            q += 32;
            is += 2;
        }
    }

    /** The 6-bit scale of sub-block j: bytes 0-3 hold scales 0-3, bytes 8-11 the low nibbles of 4-7, whose top bits sit in bytes 0-3. */
    private static int scale(MemorySegment s, long sc, int j) {
        return j < 4 ? u8(s, sc + j) & 63 : (u8(s, sc + j + 4) & 0xF) | ((u8(s, sc + j - 4) >>> 6) << 4);
    }

    /** The 6-bit min of sub-block j: bytes 4-7 for 0-3; for 4-7 the high nibbles of bytes 8-11 and the top bits of bytes 4-7. */
    private static int mins(MemorySegment s, long sc, int j) {
        return j < 4 ? u8(s, sc + j + 4) & 63 : (u8(s, sc + j + 4) >>> 4) | ((u8(s, sc + j) >>> 6) << 4);
    }

    private static void q6_K(MemorySegment s, long b, float[] y, int o) {
        float d = half(s, b + 208);
        long ql = b, qh = b + 128, sc = b + 192;
        for (int n = 0; n < 256; n += 128) {
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                int lo0 = u8(s, ql + l), lo32 = u8(s, ql + l + 32), h = u8(s, qh + l);
                int q1 = ((lo0 & 0xF) | ((h & 3) << 4)) - 32;
                int q2 = ((lo32 & 0xF) | (((h >>> 2) & 3) << 4)) - 32;
                int q3 = ((lo0 >>> 4) | (((h >>> 4) & 3) << 4)) - 32;
                int q4 = ((lo32 >>> 4) | (((h >>> 6) & 3) << 4)) - 32;
                y[o + l] = d * s.get(ValueLayout.JAVA_BYTE, sc + is) * q1;
                y[o + l + 32] = d * s.get(ValueLayout.JAVA_BYTE, sc + is + 2) * q2;
                y[o + l + 64] = d * s.get(ValueLayout.JAVA_BYTE, sc + is + 4) * q3;
                y[o + l + 96] = d * s.get(ValueLayout.JAVA_BYTE, sc + is + 6) * q4;
            }
            o += 128;
            ql += 64;
            qh += 32;
            sc += 8;
        }
    }

    /** Q8_0 blocks of {@code n} values (a multiple of 32) from {@code x[from ..]}, as quantize_row_q8_0_ref writes them. */
    public static byte[] quantizeQ8_0(float[] x, int from, int n) {
        var out = new byte[n / 32 * 34];
        for (int b = 0; b < n / 32; b++) {
            int base = from + b * 32;
            float amax = 0f;
            for (int j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(x[base + j]));
            float d = amax / 127;
            float id = d != 0f ? 1.0f / d : 0.0f;
            putHalf(out, b * 34, Float.floatToFloat16(d));
            for (int j = 0; j < 32; j++) out[b * 34 + 2 + j] = (byte) roundHalfAway(x[base + j] * id);
        }
        return out;
    }

    /** Q4_0 blocks of {@code n} values (a multiple of 32) from {@code x[from ..]}, as quantize_row_q4_0_ref writes them. */
    public static byte[] quantizeQ4_0(float[] x, int from, int n) {
        var out = new byte[n / 32 * 18];
        for (int b = 0; b < n / 32; b++) {
            int base = from + b * 32;
            float amax = 0f, max = 0f;
            for (int j = 0; j < 32; j++) {
                float v = x[base + j];
                if (amax < Math.abs(v)) {
                    amax = Math.abs(v);
                    max = v;
                }
            }
            float d = max / -8;
            float id = d != 0f ? 1.0f / d : 0.0f;
            putHalf(out, b * 18, Float.floatToFloat16(d));
            for (int j = 0; j < 16; j++) {
                int x0 = Math.min(15, (byte) (int) (x[base + j] * id + 8.5f));
                int x1 = Math.min(15, (byte) (int) (x[base + 16 + j] * id + 8.5f));
                out[b * 18 + 2 + j] = (byte) ((x0 & 0xF) | (x1 << 4));
            }
        }
        return out;
    }

    /** C's roundf: halfway cases away from zero. */
    private static float roundHalfAway(float v) { return (float) Math.copySign(Math.floor(Math.abs((double) v) + 0.5), v); }

    private static void putHalf(byte[] b, int at, short h) {
        b[at] = (byte) h;
        b[at + 1] = (byte) (h >>> 8);
    }
}
