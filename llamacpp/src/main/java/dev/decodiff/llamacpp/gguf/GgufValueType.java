package dev.decodiff.llamacpp.gguf;

/** The metadata value types of the GGUF format (gguf.h's enum gguf_type), with their ids. */
public enum GgufValueType {
    UINT8(0, 1), INT8(1, 1), UINT16(2, 2), INT16(3, 2), UINT32(4, 4), INT32(5, 4), FLOAT32(6, 4), BOOL(7, 1),
    STRING(8, -1), ARRAY(9, -1), UINT64(10, 8), INT64(11, 8), FLOAT64(12, 8);

    private final int id;
    private final int bytes;

    GgufValueType(int id, int bytes) {
        this.id = id;
        this.bytes = bytes;
    }

    public int id() { return id; }

    /** Size of a scalar of this type; -1 for STRING and ARRAY, whose size depends on the value. */
    public int bytes() { return bytes; }

    public boolean isInteger() { return this != FLOAT32 && this != FLOAT64 && bytes > 0 && this != BOOL; }

    /** The type of this id, or null for an id the format does not define. */
    public static GgufValueType ofId(long id) {
        for (var t : values()) if (t.id == id) return t;
        return null;
    }
}
