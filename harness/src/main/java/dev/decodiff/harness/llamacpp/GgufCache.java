package dev.decodiff.harness.llamacpp;

import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.live.ModelLocator;
import dev.decodiff.llamacpp.gguf.GgufOutputType;
import dev.decodiff.llamacpp.gguf.HfToGguf;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Locale;

/**
 * GGUF files converted on the fly from checkpoint folders, kept under the user's cache folder and named by the
 * checkpoint's config and weights hashes and the converter's revision, so a changed checkpoint (or converter) is
 * converted again and an unchanged one only once.
 */
public final class GgufCache {
    private GgufCache() {}

    public static Path folder() { return dev.decodiff.llamacpp.ffi.LlamaCppHome.userCache().resolve("gguf"); }

    /** The GGUF of {@code checkpoint} with weight matrices of {@code type}, converting it first if not cached. */
    public static Path of(Path checkpoint, GgufOutputType type) {
        var id = ModelLocator.identity(checkpoint);
        String name = checkpoint.toAbsolutePath().normalize().getFileName() + "-" + id.configSha256().substring(0, 12) + "-"
                + (id.weightsSha256() == null ? "noweights" : id.weightsSha256().substring(0, 12)) + "-" + type.name().toLowerCase(Locale.ROOT) + "-r" + HfToGguf.REVISION + ".gguf";
        Path out = folder().resolve(name);
        if (Files.isRegularFile(out)) return out;
        try {
            Files.createDirectories(out.getParent());
            Path tmp = Files.createTempFile(out.getParent(), name, ".partial");
            try {
                HfToGguf.convert(checkpoint, tmp, type, true);
                Files.move(tmp, out, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            } finally {
                Files.deleteIfExists(tmp);
            }
        } catch (IOException e) {
            throw new BadInputException(out, "cannot write the converted GGUF (" + e.getMessage() + "); free space in " + folder()
                    + " or pass --gguf FILE", e);
        }
        return out;
    }
}
