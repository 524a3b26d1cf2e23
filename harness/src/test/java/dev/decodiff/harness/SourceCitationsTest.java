package dev.decodiff.harness;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;

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
        try (var files = Files.walk(root)) {
            for (Path f : files.filter(Files::isRegularFile).filter(SourceCitationsTest::isSourceOrDoc).toList()) {
                String text = Files.readString(f);
                for (String a : ABSENT) if (cites(text, a)) found.add(root.relativize(f) + " cites " + a);
            }
        }
        assertThat(found).isEmpty();
    }

    /** An occurrence that is not a string literal of its own (a test asserting that output lacks the name). */
    private static boolean cites(String text, String name) {
        for (int i = text.indexOf(name); i >= 0; i = text.indexOf(name, i + 1))
            if (i == 0 || text.charAt(i - 1) != '"') return true;
        return false;
    }

    private static boolean isSourceOrDoc(Path f) {
        String p = f.toString(), n = f.getFileName().toString();
        if (p.contains("/target/") || p.contains("/.git/") || p.contains("/node_modules/") || p.contains("/.device-carry/")) return false;
        return n.endsWith(".java") || n.endsWith(".md") || n.endsWith(".py") || n.endsWith(".sh");
    }
}
