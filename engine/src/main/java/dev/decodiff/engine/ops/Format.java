package dev.decodiff.engine.ops;

/** A number format an engine may round an fp32 value to (round to nearest, ties to even; specials kept). */
public enum Format {
    F32("fp32"), BF16("bf16"), F16("fp16");

    private final String id;

    Format(String id) { this.id = id; }

    public String id() { return id; }

    public float round(float x) {
        return switch (this) {
            case F32 -> x;
            case BF16 -> bf16(x);
            case F16 -> Float.float16ToFloat(Float.floatToFloat16(x));
        };
    }

    /** Rounds a[off, off+n) in place. */
    public void round(float[] a, int off, int n) {
        if (this == F32) return;
        for (int i = off; i < off + n; i++) a[i] = round(a[i]);
    }

    public float[] round(float[] a) {
        round(a, 0, a.length);
        return a;
    }

    static float bf16(float x) {
        if (Float.isNaN(x)) return x;
        int b = Float.floatToRawIntBits(x);
        b += 0x7FFF + ((b >>> 16) & 1);
        return Float.intBitsToFloat(b & 0xFFFF0000);
    }
}
