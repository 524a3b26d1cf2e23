package dev.decodiff.engine;

import java.nio.file.Path;

/** A session's KV state at a token boundary: what a prefix cache stores and a new request resumes from. */
public record KvSnapshot(Path modelDir, KvType keyType, KvType valueType, LayerCache[] caches, int[] tokens) {
    public int length() { return tokens.length; }

    public long bytes() {
        long perPos = 0;
        for (var c : caches) if (c != null) perPos += c.bytesPerPosition();
        return perPos * tokens.length;
    }
}
