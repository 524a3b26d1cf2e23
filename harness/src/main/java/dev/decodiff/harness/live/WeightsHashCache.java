package dev.decodiff.harness.live;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.engine.CheckpointFiles;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Objects;

/**
 * A large checkpoint's weights hash, remembered. Every live compare checks the checkpoint against the reference's
 * hashes, and hashing means reading every byte: 9.3 GB for an E2B-sized model, tens of seconds from disk, every run,
 * before any work. The hash is kept under {@code ~/.cache/decodiff/weights-sha256/} (or {@code $XDG_CACHE_HOME}) with
 * each shard's name, size, modification time and file identity (inode), and reused only while all of them are
 * unchanged — the same test {@code make} and {@code git} trust; a shard rewritten, replaced or touched is hashed again.
 * Checkpoints under {@value #MIN_BYTES} bytes are always hashed (a second or less), and a cache that cannot be read or
 * written is no error: the hash is computed.
 */
final class WeightsHashCache {
    static final long MIN_BYTES = 256L << 20;
    private static final ObjectMapper JSON = new ObjectMapper();

    private WeightsHashCache() {}

    /** The weights hash of the open checkpoint {@code files} in {@code dir}: remembered, or computed (and remembered). */
    static String weightsSha256(Path dir, CheckpointFiles files) { return weightsSha256(dir, files, root(), MIN_BYTES); }

    /** As {@link #weightsSha256(Path, CheckpointFiles)}, with the cache in {@code root} for checkpoints of {@code minBytes} or more. */
    static String weightsSha256(Path dir, CheckpointFiles files, Path root, long minBytes) {
        List<Shard> shards;
        try {
            shards = shards(files.shardPaths());
        } catch (IOException e) {
            return files.weightsSha256();
        }
        long bytes = shards.stream().mapToLong(Shard::size).sum();
        Path entry = bytes < minBytes ? null : entry(root, dir);
        if (entry != null) {
            try {
                JsonNode j = JSON.readTree(entry.toFile());
                if (shardsOf(j).equals(shards) && j.path("weights_sha256").isTextual()) return j.get("weights_sha256").asText();
            } catch (IOException | RuntimeException ignored) {
                // no entry, or a damaged one: hash
            }
        }
        String sha = files.weightsSha256();
        if (entry != null) remember(entry, dir, shards, sha);
        return sha;
    }

    /** A shard as the cache knows it. */
    record Shard(String name, long size, long modifiedNanos, String fileKey) {}

    private static List<Shard> shards(List<Path> paths) throws IOException {
        var out = new ArrayList<Shard>();
        for (Path p : paths) {
            var a = Files.readAttributes(p, BasicFileAttributes.class);
            var t = a.lastModifiedTime().toInstant();
            out.add(new Shard(p.getFileName().toString(), a.size(), t.getEpochSecond() * 1_000_000_000L + t.getNano(), Objects.toString(a.fileKey())));
        }
        out.sort(java.util.Comparator.comparing(Shard::name));
        return out;
    }

    private static List<Shard> shardsOf(JsonNode j) {
        var out = new ArrayList<Shard>();
        for (var s : j.path("shards"))
            out.add(new Shard(s.path("name").asText(), s.path("size").asLong(), s.path("modified_ns").asLong(), s.path("file_key").asText()));
        return out;
    }

    /** The entry's file: named by the checkpoint folder's real path, so a folder reached by two paths has one entry. */
    private static Path entry(Path root, Path dir) {
        try {
            String real = dir.toRealPath().toString();
            byte[] h = MessageDigest.getInstance("SHA-256").digest(real.getBytes(StandardCharsets.UTF_8));
            return root.resolve(HexFormat.of().formatHex(h, 0, 16) + ".json");
        } catch (IOException | NoSuchAlgorithmException | RuntimeException e) {
            return null;
        }
    }

    static Path root() {
        String xdg = System.getenv("XDG_CACHE_HOME");
        Path base = xdg != null && !xdg.isBlank() ? Path.of(xdg) : Path.of(System.getProperty("user.home"), ".cache");
        return base.resolve("decodiff").resolve("weights-sha256");
    }

    private static void remember(Path entry, Path dir, List<Shard> shards, String sha) {
        try {
            Files.createDirectories(entry.getParent());
            var o = JSON.createObjectNode();
            o.put("checkpoint", dir.toRealPath().toString());
            o.put("weights_sha256", sha);
            var a = o.putArray("shards");
            for (var s : shards) {
                var e = a.addObject();
                e.put("name", s.name());
                e.put("size", s.size());
                e.put("modified_ns", s.modifiedNanos());
                e.put("file_key", s.fileKey());
            }
            Path tmp = Files.createTempFile(entry.getParent(), entry.getFileName().toString(), ".partial");
            try {
                Files.writeString(tmp, o.toPrettyString());
                Files.move(tmp, entry, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            } finally {
                Files.deleteIfExists(tmp);
            }
        } catch (IOException | RuntimeException ignored) {
            // a cache that cannot be written: the next run hashes again
        }
    }
}
