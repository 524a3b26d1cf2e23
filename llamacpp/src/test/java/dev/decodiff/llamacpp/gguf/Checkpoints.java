package dev.decodiff.llamacpp.gguf;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/** The bundled checkpoints, found from the module folder the tests run in. */
final class Checkpoints {
    static final List<String> BUNDLED = List.of("gemma4-tiny", "gemma4-tiny-ple", "gemma4-tiny-moe");

    private Checkpoints() {}

    static Path root() {
        Path p = Path.of("").toAbsolutePath();
        while (p != null && !Files.isDirectory(p.resolve("checkpoints/gemma4-tiny"))) p = p.getParent();
        if (p == null) throw new IllegalStateException("cannot find checkpoints/gemma4-tiny above " + Path.of("").toAbsolutePath());
        return p;
    }

    static Path dir(String name) { return root().resolve("checkpoints").resolve(name); }
}
