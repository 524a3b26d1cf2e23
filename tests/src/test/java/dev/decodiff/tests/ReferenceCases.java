package dev.decodiff.tests;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;

/** The committed reference dumps (made by transformers) and the repository paths tests need. */
final class ReferenceCases {
    private ReferenceCases() {}

    static Path repoRoot() {
        Path p = Path.of("").toAbsolutePath();
        while (p != null && !Files.isDirectory(p.resolve("reference-dumps"))) p = p.getParent();
        if (p == null) throw new IllegalStateException("cannot find the repository root (a folder with reference-dumps/) above " + Path.of("").toAbsolutePath());
        return p;
    }

    /** Every case folder reference-dumps/CHECKPOINT/CASE with a manifest, fp32 references only. */
    static List<Path> fp32Cases() {
        try (Stream<Path> s = Files.walk(repoRoot().resolve("reference-dumps"), 2)) {
            var cases = s.filter(p -> Files.isRegularFile(p.resolve("manifest.json")))
                    .filter(p -> !p.getFileName().toString().contains("bf16"))
                    .sorted().toList();
            if (cases.isEmpty()) throw new IllegalStateException("no reference dumps under reference-dumps/");
            return cases;
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    static Path checkpointOf(Path caseDir) {
        return repoRoot().resolve("checkpoints").resolve(caseDir.getParent().getFileName());
    }
}
