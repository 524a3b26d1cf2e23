package dev.decodiff.harness;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.ArrayList;
import java.util.Set;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Comments and docs cite only what the repository holds (docs/*.md, README.md): the design notes and the model
 * notes the project was planned from are not part of it, so a reader following such a citation finds nothing.
 */
class SourceCitationsTest {
    private static final String[] ABSENT = {"DESIGN" + ".md", "gemma4" + "-spec"};

    @Test
    void noSourceFileOrDocCitesAFileTheRepositoryDoesNotHave() throws IOException {
        Path root = Home.get();
        var found = new ArrayList<String>();
        // Build output is never entered: the test runner writes its reports there while this test walks the tree.
        Files.walkFileTree(root, new SimpleFileVisitor<>() {
            @Override
            public FileVisitResult preVisitDirectory(Path dir, BasicFileAttributes attrs) {
                return SKIPPED.contains(dir.getFileName() == null ? "" : dir.getFileName().toString()) ? FileVisitResult.SKIP_SUBTREE
                        : FileVisitResult.CONTINUE;
            }

            @Override
            public FileVisitResult visitFile(Path f, BasicFileAttributes attrs) throws IOException {
                if (attrs.isRegularFile() && isSourceOrDoc(f)) {
                    String text = Files.readString(f);
                    for (String a : ABSENT) if (cites(text, a)) found.add(root.relativize(f) + " cites " + a);
                }
                return FileVisitResult.CONTINUE;
            }
        });
        assertThat(found).isEmpty();
    }

    private static final Set<String> SKIPPED = Set.of("target", ".git", "node_modules", ".device-carry");

    /** An occurrence that is not a string literal of its own (a test asserting that output lacks the name). */
    private static boolean cites(String text, String name) {
        for (int i = text.indexOf(name); i >= 0; i = text.indexOf(name, i + 1))
            if (i == 0 || text.charAt(i - 1) != '"') return true;
        return false;
    }

    private static boolean isSourceOrDoc(Path f) {
        String n = f.getFileName().toString();
        return n.endsWith(".java") || n.endsWith(".md") || n.endsWith(".py") || n.endsWith(".sh");
    }
}
