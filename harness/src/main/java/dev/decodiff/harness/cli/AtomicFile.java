package dev.decodiff.harness.cli;

import dev.decodiff.harness.BadInputException;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

/**
 * Writes a text file all or nothing: into a temporary file beside it, forced to disk, then moved over the target
 * in one step. A full disk or a read-only folder leaves the target as it was and no temporary file behind.
 */
final class AtomicFile {
    private AtomicFile() {}

    static void write(Path target, String text, String what) {
        Path abs = target.toAbsolutePath();
        Path tmp = null;
        try {
            Files.createDirectories(abs.getParent());
            tmp = Files.createTempFile(abs.getParent(), "." + abs.getFileName() + ".", ".partial");
            try (var ch = java.nio.channels.FileChannel.open(tmp, java.nio.file.StandardOpenOption.WRITE)) {
                var buf = java.nio.ByteBuffer.wrap(text.getBytes(StandardCharsets.UTF_8));
                while (buf.hasRemaining()) ch.write(buf);
                ch.force(true);
            }
            Files.move(tmp, abs, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            deleteQuietly(tmp);
            throw new BadInputException(target, "cannot write " + what + " (" + reason(e) + "); nothing was written — free space or choose another path");
        }
    }

    static String reason(IOException e) {
        String m = e.getMessage();
        if (e instanceof java.nio.file.FileSystemException f && f.getReason() != null) m = f.getReason();
        return e.getClass().getSimpleName() + (m == null ? "" : ": " + m);
    }

    private static void deleteQuietly(Path p) {
        if (p == null) return;
        try {
            Files.deleteIfExists(p);
        } catch (IOException ignored) {
            // the write already failed; the message says so
        }
    }
}
