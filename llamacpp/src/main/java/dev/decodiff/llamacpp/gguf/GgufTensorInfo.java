package dev.decodiff.llamacpp.gguf;

import java.util.Arrays;

/**
 * One tensor of a GGUF file: its name, its dimensions in ggml order ({@code ne[0]} is the contiguous one, so a
 * PyTorch [out, in] weight is ne = {in, out}), its element type and its offset in the data section.
 */
public record GgufTensorInfo(String name, long[] ne, GgmlType type, long offset) {
    public GgufTensorInfo {
        ne = ne.clone();
    }

    @Override
    public long[] ne() { return ne.clone(); }

    public long elementCount() {
        long n = 1;
        for (long d : ne) n = Math.multiplyExact(n, d);
        return n;
    }

    /** Bytes of the data: whole rows of ne[0] elements in this type. */
    public long byteSize() {
        long rows = 1;
        for (int i = 1; i < ne.length; i++) rows = Math.multiplyExact(rows, ne[i]);
        return Math.multiplyExact(type.rowBytes(ne[0]), rows);
    }

    public String shapeString() { return Arrays.toString(ne); }

    @Override
    public boolean equals(Object o) {
        return o instanceof GgufTensorInfo t && name.equals(t.name) && Arrays.equals(ne, t.ne) && type == t.type && offset == t.offset;
    }

    @Override
    public int hashCode() { return name.hashCode() * 31 + Arrays.hashCode(ne); }

    @Override
    public String toString() { return name + " " + type + " " + shapeString() + " @" + offset; }
}
