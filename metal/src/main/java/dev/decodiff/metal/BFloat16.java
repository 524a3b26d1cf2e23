package dev.decodiff.metal;

/** bfloat16 conversions with torch's rounding: the high 16 bits of an fp32, rounded to nearest even. */
public final class BFloat16 {
    private BFloat16() {}

    /** Round to nearest even, as torch's float → bfloat16 cast (a NaN stays a quiet NaN). */
    public static short round(float f) {
        int bits = Float.floatToRawIntBits(f);
        if (Float.isNaN(f)) return (short) ((bits >>> 16) | 0x40);
        int rounding = 0x7fff + ((bits >>> 16) & 1);
        return (short) ((bits + rounding) >>> 16);
    }

    /** x[off .. off+n) rounded. */
    public static short[] round(float[] x, int off, int n) {
        short[] out = new short[n];
        for (int i = 0; i < n; i++) out[i] = round(x[off + i]);
        return out;
    }

    /** The bf16 value as fp32 (exact). */
    public static float widen(short b) { return Float.intBitsToFloat((b & 0xffff) << 16); }
}
