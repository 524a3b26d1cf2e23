package dev.decodiff.llamacpp.gguf;

import java.util.List;
import java.util.Objects;

/**
 * One GGUF metadata value. Integers are held as {@link Long} (unsigned ones by value; a UINT64 above
 * Long.MAX_VALUE keeps its bits), FLOAT32 as {@link Float}, FLOAT64 as {@link Double}, BOOL as {@link Boolean},
 * STRING as {@link String}, ARRAY as an immutable list whose items follow {@code itemType} (nested arrays as
 * GgufValue items).
 *
 * @param itemType the element type of an ARRAY; null otherwise
 */
public record GgufValue(GgufValueType type, GgufValueType itemType, Object value) {
    public GgufValue {
        Objects.requireNonNull(type);
        Objects.requireNonNull(value);
        if ((type == GgufValueType.ARRAY) != (itemType != null))
            throw new IllegalArgumentException("itemType is given exactly for arrays");
        if (type == GgufValueType.ARRAY) value = List.copyOf((List<?>) value);
    }

    public static GgufValue u32(long v) {
        if (v < 0 || v > 0xffff_ffffL) throw new IllegalArgumentException("not a uint32: " + v);
        return new GgufValue(GgufValueType.UINT32, null, v);
    }

    public static GgufValue f32(float v) { return new GgufValue(GgufValueType.FLOAT32, null, v); }

    public static GgufValue bool(boolean v) { return new GgufValue(GgufValueType.BOOL, null, v); }

    public static GgufValue string(String v) { return new GgufValue(GgufValueType.STRING, null, v); }

    public static GgufValue i32Array(List<Integer> v) { return new GgufValue(GgufValueType.ARRAY, GgufValueType.INT32, v.stream().map(Integer::longValue).toList()); }

    public static GgufValue boolArray(List<Boolean> v) { return new GgufValue(GgufValueType.ARRAY, GgufValueType.BOOL, v); }

    public static GgufValue f32Array(List<Float> v) { return new GgufValue(GgufValueType.ARRAY, GgufValueType.FLOAT32, v); }

    public static GgufValue stringArray(List<String> v) { return new GgufValue(GgufValueType.ARRAY, GgufValueType.STRING, v); }

    public long asLong() {
        if (!type.isInteger()) throw new IllegalStateException("a " + type + " is not an integer");
        return (Long) value;
    }

    public double asDouble() {
        return switch (type) {
            case FLOAT32 -> (Float) value;
            case FLOAT64 -> (Double) value;
            default -> throw new IllegalStateException("a " + type + " is not a float");
        };
    }

    public boolean asBoolean() {
        if (type != GgufValueType.BOOL) throw new IllegalStateException("a " + type + " is not a bool");
        return (Boolean) value;
    }

    public String asString() {
        if (type != GgufValueType.STRING) throw new IllegalStateException("a " + type + " is not a string");
        return (String) value;
    }

    public List<?> asList() {
        if (type != GgufValueType.ARRAY) throw new IllegalStateException("a " + type + " is not an array");
        return (List<?>) value;
    }

    /** The value in a few words, for `decodiff inspect` (long arrays are abbreviated). */
    public String describe() {
        if (type != GgufValueType.ARRAY) return type == GgufValueType.STRING ? quote((String) value, 80) : value.toString();
        var items = asList();
        var sb = new StringBuilder(itemType.name().toLowerCase()).append('[').append(items.size()).append("] ");
        int shown = Math.min(items.size(), 8);
        sb.append('[');
        for (int i = 0; i < shown; i++) {
            if (i > 0) sb.append(", ");
            Object o = items.get(i);
            sb.append(o instanceof String s ? quote(s, 24) : o instanceof GgufValue g ? g.describe() : o.toString());
        }
        if (shown < items.size()) sb.append(", …");
        return sb.append(']').toString();
    }

    private static String quote(String s, int max) {
        String t = s.length() > max ? s.substring(0, max) + "…" : s;
        return '"' + t.replace("\n", "\\n") + '"';
    }
}
