package dev.decodiff.harness;

import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The CLI sits on top: nothing below it (the JUnit API in testing/ above all) may reach into harness.cli. The bench
 * package is itself a command (`decodiff bench`) whose phases start the CLI in child JVMs, so it sits beside the CLI.
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
}
