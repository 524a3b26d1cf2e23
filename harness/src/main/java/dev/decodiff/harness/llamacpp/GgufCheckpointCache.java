package dev.decodiff.harness.llamacpp;

import dev.decodiff.harness.BadInputException;
import dev.decodiff.llamacpp.gguf.GgufException;
import dev.decodiff.llamacpp.gguf.GgufFile;
import dev.decodiff.llamacpp.gguf.GgufToCheckpoint;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Comparator;
import java.util.HexFormat;

/**
 * The float32 checkpoint folders of GGUF files (their weights dequantized as ggml does), made once and kept under
 * the user's cache folder, named by the GGUF's sha256 and the converter's revision: `--model FILE.gguf` runs decodiff's
 * engine on exactly the weights llama.cpp runs.
 */
public final class GgufCheckpointCache {
    private GgufCheckpointCache() {}

    public static boolean isGguf(Path p) { return p != null && p.getFileName() != null && p.getFileName().toString().endsWith(".gguf"); }

    public static Path folder() { return dev.decodiff.llamacpp.ffi.LlamaCppHome.userCache().resolve("gguf-checkpoints"); }

    /** Beside a converted folder's config.json: the path of the GGUF it was made from (not hashed; a hint only). */
    static final String SOURCE_FILE = "source-gguf.txt";

    /** The sha256 of the GGUF a checkpoint folder was made from (its config.json's record), or null for any other folder. */
    public static String sourceSha256(Path dir) {
        try {
            var src = new com.fasterxml.jackson.databind.ObjectMapper().readTree(dir.resolve("config.json").toFile()).get(GgufToCheckpoint.SOURCE_KEY);
            return src == null || !src.has("sha256") ? null : src.get("sha256").asText();
        } catch (IOException e) {
            return null;
        }
    }

    /**
     * The GGUF file a converted folder was made from: the one recorded beside it, else one of {@code candidates}, if its
     * bytes still hash to the folder's record; null when none does.
     */
    public static Path sourceOf(Path dir, java.util.List<Path> candidates) {
        String sha = sourceSha256(dir);
        if (sha == null) return null;
        var tries = new java.util.ArrayList<Path>();
        try {
            if (Files.isRegularFile(dir.resolve(SOURCE_FILE))) tries.add(Path.of(Files.readString(dir.resolve(SOURCE_FILE)).strip()));
        } catch (IOException | java.nio.file.InvalidPathException e) {
            // no hint: the candidates remain
        }
        tries.addAll(candidates);
        for (Path p : tries) if (Files.isRegularFile(p) && sha.equals(sha256(p))) return p;
        return null;
    }

    /** The checkpoint folder of {@code gguf}, converting it first if not cached. */
    public static Path of(Path gguf) {
        if (!Files.isRegularFile(gguf)) throw new BadInputException(gguf, "does not exist; --model takes a checkpoint folder or a .gguf file");
        String sha = sha256(gguf);
        String stem = gguf.getFileName().toString().replaceFirst("\\.gguf$", "");
        Path out = folder().resolve(stem + "-" + sha.substring(0, 12) + "-r" + GgufToCheckpoint.REVISION);
        if (Files.isRegularFile(out.resolve("config.json")) && Files.isRegularFile(out.resolve("model.safetensors"))) {
            recordSource(out, gguf);
            return out;
        }
        try {
            Files.createDirectories(folder());
            Path tmp = Files.createTempDirectory(folder(), stem + ".partial");
            try {
                GgufToCheckpoint.convert(GgufFile.read(gguf), sha, tmp);
                Files.move(tmp, out, StandardCopyOption.ATOMIC_MOVE);
                recordSource(out, gguf);
            } catch (GgufException e) {
                throw new BadInputException(e.getMessage(), e);
            } finally {
                if (Files.exists(tmp)) try (var s = Files.walk(tmp)) {
                    s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
                }
            }
        } catch (IOException e) {
            throw new BadInputException(out, "cannot write the checkpoint of " + gguf + " (" + e.getMessage() + "); free space in " + folder(), e);
        }
        return out;
    }

    private static void recordSource(Path dir, Path gguf) {
        try {
            Files.writeString(dir.resolve(SOURCE_FILE), gguf.toAbsolutePath().normalize() + "\n");
        } catch (IOException e) {
            // the hint only saves a search; the bundled GGUFs are still found by their hash
        }
    }

    static String sha256(Path f) {
        try (InputStream in = Files.newInputStream(f)) {
            var md = MessageDigest.getInstance("SHA-256");
            byte[] buf = new byte[1 << 20];
            int n;
            while ((n = in.read(buf)) > 0) md.update(buf, 0, n);
            return HexFormat.of().formatHex(md.digest());
        } catch (IOException e) {
            throw new BadInputException(f, "cannot read: " + e.getMessage());
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
