package dev.decodiff.harness;

import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.TreeSet;
import java.util.regex.Pattern;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The CLI sits on top: nothing below it (the JUnit API in testing/ above all) may reach into harness.cli. The bench
 * package is itself a command (`decodiff bench`) whose phases start the CLI in child JVMs, so it sits beside the CLI.
 * A model family's own types are reached through its harness plug-in (harness/arch/), not from generic code.
 */
class PackageDependenciesTest {
    @Test
    void noPackageOutsideTheCliDependsOnTheCli() throws Exception {
        Path main = Path.of("src/main/java/dev/decodiff/harness");
        assertThat(main.resolve("testing")).isDirectory();
        var offenders = new ArrayList<String>();
        try (var files = Files.walk(main)) {
            for (Path f : files.filter(p -> p.toString().endsWith(".java")).toList()) {
                if (f.startsWith(main.resolve("cli")) || f.startsWith(main.resolve("bench"))) continue;
                if (Files.readString(f).contains("dev.decodiff.harness.cli.")) offenders.add(main.relativize(f).toString());
            }
        }
        assertThat(offenders).isEmpty();
    }

    /**
     * A family's own type (Gemma4…, Qwen35…, or anything of the Llama family's engine package): generic code reaches it
     * only through the family's plug-in. The Llama family is matched by its package, not a name prefix: "Llama…" also
     * starts llama.cpp's types (LlamaCpp…), which generic code may name; any use of the family's types needs that
     * package in an import.
     */
    private static final Pattern FAMILY_TYPE = Pattern.compile("\\b(Gemma4|Qwen35)[A-Z]\\w*|\\bdev\\.decodiff\\.engine\\.llama\\.");

    @Test
    void genericCodeReachesAFamilyThroughItsPlugIn() throws Exception {
        Path main = Path.of("src/main/java/dev/decodiff/harness");
        var naming = new TreeSet<String>();
        try (var files = Files.walk(main)) {
            for (Path f : files.filter(p -> p.toString().endsWith(".java")).toList()) {
                if (f.startsWith(main.resolve("arch"))) continue;
                if (FAMILY_TYPE.matcher(code(Files.readString(f))).find()) naming.add(main.relativize(f).toString().replace('\\', '/'));
            }
        }
        assertThat(naming).as("files outside harness/arch/ that name a family's own types; reach them through the family's"
                + " ArchitectureSupport").isEmpty();
    }

    /** The source's code alone: comments, string and character literals blanked (a name in prose or a message is no use). */
    static String code(String src) {
        var out = new StringBuilder(src.length());
        int n = src.length();
        for (int i = 0; i < n; i++) {
            char c = src.charAt(i);
            if (c == '/' && i + 1 < n && src.charAt(i + 1) == '/') {
                while (i < n && src.charAt(i) != '\n') i++;
                out.append('\n');
            } else if (c == '/' && i + 1 < n && src.charAt(i + 1) == '*') {
                int end = src.indexOf("*/", i + 2);
                i = end < 0 ? n : end + 1;
                out.append(' ');
            } else if (c == '"' || c == '\'') {
                // a text block's quotes pair up as empty strings around its body, which the loop then blanks likewise
                int j = i + 1;
                while (j < n && src.charAt(j) != c) j += src.charAt(j) == '\\' ? 2 : 1;
                i = j;
                out.append(' ');
            } else {
                out.append(c);
            }
        }
        return out.toString();
    }
}
