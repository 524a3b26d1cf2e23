package dev.decodiff.llamacpp.gguf;

import com.fasterxml.jackson.databind.JsonNode;

import java.nio.file.Path;

/**
 * The integer hyperparameters a GGUF plan reads from a checkpoint's config.json (its text config where it has one),
 * each refused in one line naming the file and the key when present but not a non-negative integer. Shared by every
 * family's plan, so the three read a config the same way.
 */
record HfConfigInts(JsonNode c, Path file) {
    /** The key's node, or null where it is absent or JSON null. */
    JsonNode node(String k) {
        var n = c.get(k);
        return n == null || n.isNull() ? null : n;
    }

    Integer optInt(String k) {
        var n = node(k);
        if (n == null) return null;
        if (!n.canConvertToInt() || n.asInt() < 0) throw new GgufException(file, k + " is " + n + ", not a non-negative integer");
        return n.asInt();
    }

    int integer(String k, int def) {
        var v = optInt(k);
        return v == null ? def : v;
    }

    int required(String k) {
        var v = optInt(k);
        if (v == null) throw new GgufException(file, "has no " + k);
        return v;
    }

    /** A safetensors shape (outermost first) as ggml's ne (innermost first). */
    static long[] ne(long[] shape) {
        var ne = new long[shape.length];
        for (int i = 0; i < shape.length; i++) ne[i] = shape[shape.length - 1 - i];
        return ne;
    }
}
