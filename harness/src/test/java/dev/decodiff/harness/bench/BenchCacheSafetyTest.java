package dev.decodiff.harness.bench;

import dev.decodiff.harness.Home;
import dev.decodiff.harness.cli.Main;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

import static dev.decodiff.harness.cli.CliTest.run;
import static org.assertj.core.api.Assertions.assertThat;

/** bench synthesizes checkpoints into --cache: never into, onto or around the bundled data. */
class BenchCacheSafetyTest {
    @Test
    void aCacheEqualToInsideOrContainingTheBundledDataIsRefusedBeforeAnyWork() throws IOException {
        Path checkpoints = Home.get().resolve("checkpoints");
        try (var before = Files.list(checkpoints)) {
            var listed = before.toList();
            record Case(Path cache, String how) {}
            for (var c : new Case[]{new Case(checkpoints, "--cache is the input"), new Case(checkpoints.resolve("bench"), "--cache is inside the input"),
                    new Case(Home.get(), "--cache contains the input")}) {
                var r = run("bench", "--cache", c.cache().toString());
                assertThat(r.code()).as(c.cache() + ": " + r.err()).isEqualTo(Main.BAD_INPUT);
                assertThat(r.err()).contains(c.how()).doesNotContain("synthesizing").hasLineCount(1);
            }
            try (var after = Files.list(checkpoints)) {
                assertThat(after.toList()).containsExactlyInAnyOrderElementsOf(listed);
            }
        }
    }
}
