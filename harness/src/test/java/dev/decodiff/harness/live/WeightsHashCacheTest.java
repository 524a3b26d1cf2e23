package dev.decodiff.harness.live;

import dev.decodiff.engine.CheckpointFiles;
import dev.decodiff.harness.TinyCheckpoint;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.security.MessageDigest;
import java.util.HexFormat;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The remembered weights hash is the hash of the bytes (made here with MessageDigest over the file), reused while the
 * shard is unchanged, and made again once the shard's bytes or its modification time change; a small checkpoint is
 * never remembered.
 */
class WeightsHashCacheTest {
    private static String sha(Path f) throws Exception {
        return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(Files.readAllBytes(f)));
    }

    private static String cached(Path dir, Path root, long min) {
        try (var f = CheckpointFiles.open(dir)) {
            return WeightsHashCache.weightsSha256(dir, f, root, min);
        }
    }

    @Test
    void aRememberedHashIsReusedOnlyWhileTheShardIsUnchanged(@TempDir Path tmp) throws Exception {
        Path dir = TinyCheckpoint.write(tmp.resolve("ckpt")), root = tmp.resolve("cache"), shard = dir.resolve("model.safetensors");
        String real = sha(shard);
        assertThat(cached(dir, root, 0)).isEqualTo(real);
        Path entry;
        try (var s = Files.list(root)) {
            entry = s.filter(p -> p.toString().endsWith(".json")).findFirst().orElseThrow();
        }
        // what is remembered is what is returned while nothing changed (a planted value shows the entry is read)
        Files.writeString(entry, Files.readString(entry).replace(real, "f".repeat(64)));
        assertThat(cached(dir, root, 0)).isEqualTo("f".repeat(64));

        // other bytes, same size: a new modification time, so hashed again
        byte[] b = Files.readAllBytes(shard);
        b[b.length - 1] ^= 1;
        Files.write(shard, b);
        Files.setLastModifiedTime(shard, FileTime.fromMillis(Files.getLastModifiedTime(shard).toMillis() + 5_000));
        assertThat(cached(dir, root, 0)).isEqualTo(sha(shard)).isNotEqualTo(real);

        // only touched: hashed again too (the test cannot tell a touch from a rewrite)
        Files.writeString(entry, Files.readString(entry).replace(sha(shard), "e".repeat(64)));
        Files.setLastModifiedTime(shard, FileTime.fromMillis(Files.getLastModifiedTime(shard).toMillis() + 5_000));
        assertThat(cached(dir, root, 0)).isEqualTo(sha(shard));
    }

    @Test
    void aSmallCheckpointIsAlwaysHashedAndADamagedEntryIsNoError(@TempDir Path tmp) throws Exception {
        Path dir = TinyCheckpoint.write(tmp.resolve("ckpt")), root = tmp.resolve("cache");
        assertThat(cached(dir, root, WeightsHashCache.MIN_BYTES)).isEqualTo(sha(dir.resolve("model.safetensors")));
        assertThat(root).doesNotExist();
        Files.createDirectories(root);
        assertThat(cached(dir, root, 0)).isEqualTo(sha(dir.resolve("model.safetensors")));
        try (var s = Files.list(root)) {
            for (Path e : s.toList()) Files.writeString(e, "{not json");
        }
        assertThat(cached(dir, root, 0)).isEqualTo(sha(dir.resolve("model.safetensors")));
    }
}
