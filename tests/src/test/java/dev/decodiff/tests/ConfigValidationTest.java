package dev.decodiff.tests;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/** The bundled checkpoint with one config.json value made impossible: the CLI refuses it (exit 2, the file named). */
class ConfigValidationTest {
    @TempDir Path tmp;

    /** A copy of gemma4-tiny whose config.json has {@code from} replaced by {@code to}. */
    private Path tinyWith(String from, String to) throws IOException {
        Path src = ReferenceCases.repoRoot().resolve("checkpoints/gemma4-tiny"), dst = tmp.resolve("ck");
        Files.createDirectories(dst);
        try (var s = Files.list(src)) {
            for (Path p : s.toList()) Files.copy(p, dst.resolve(p.getFileName()));
        }
        String cfg = Files.readString(dst.resolve("config.json"));
        assertThat(cfg).contains(from);
        Files.writeString(dst.resolve("config.json"), cfg.replace(from, to));
        return dst;
    }

    private static void assertRefused(Cli r, Path file, String fragment) {
        assertThat(r.code()).as(r.toString()).isEqualTo(2);
        assertThat(r.err()).doesNotContain("internal error").contains(file.toString()).contains(fragment);
        assertThat(r.err().strip().lines()).as(r.toString()).hasSize(1);
    }

    @Test
    void runPastMaxPositionEmbeddingsIsRefusedUnlessTheUserOverrides() throws IOException {
        Path ck = tinyWith("\"max_position_embeddings\": 4096", "\"max_position_embeddings\": 8");
        var refused = Cli.run("run", "--model", ck.toString(), "--tokens", "2,367,965", "-n", "7", "--ids");
        assertRefused(refused, ck.resolve("config.json"), "max_position_embeddings is 8");
        assertThat(refused.err()).contains("need 9 positions").contains("--beyond-max-positions");
        var within = Cli.run("run", "--model", ck.toString(), "--tokens", "2,367,965", "-n", "6", "--ids");
        assertThat(within.code()).as(within.toString()).isZero();
        var forced = Cli.run("run", "--model", ck.toString(), "--tokens", "2,367,965", "-n", "7", "--ids", "--beyond-max-positions");
        assertThat(forced.code()).as(forced.toString()).isZero();
        assertThat(forced.out().strip().split(",")).hasSize(7);
    }

    @Test
    void dumpPastMaxPositionEmbeddingsIsRefusedUnlessTheUserOverrides() throws IOException {
        Path ck = tinyWith("\"max_position_embeddings\": 4096", "\"max_position_embeddings\": 8");
        Path out = tmp.resolve("dump");
        var refused = Cli.run("dump", "--model", ck.toString(), "--tokens", "2,367,965", "-n", "7", "--out", out.toString());
        assertRefused(refused, ck.resolve("config.json"), "max_position_embeddings is 8");
        assertThat(refused.err()).contains("need 9 positions").contains("--beyond-max-positions");
        assertThat(out).doesNotExist();
        var forced = Cli.run("dump", "--model", ck.toString(), "--tokens", "2,367,965", "-n", "7", "--out", out.toString(), "--beyond-max-positions");
        assertThat(forced.code()).as(forced.toString()).isZero();
        assertThat(out.resolve("manifest.json")).exists();
    }

    @Test
    void liveComparePastMaxPositionEmbeddingsIsRefusedUnlessTheUserOverrides() throws IOException {
        Path ck = tinyWith("\"max_position_embeddings\": 4096", "\"max_position_embeddings\": 8");
        String ref = ReferenceCases.repoRoot().resolve("reference-dumps/gemma4-tiny/short").toString();
        // the reference holds a 7-token prompt and 9 steps: 15 positions; only max_position_embeddings differs, hence --allow-mismatch
        var refused = Cli.run("compare", ref, "--model", ck.toString(), "--allow-mismatch");
        assertRefused(refused, ck.resolve("config.json"), "max_position_embeddings is 8");
        assertThat(refused.err()).contains("need 15 positions").contains("--beyond-max-positions");
        var forced = Cli.run("compare", ref, "--model", ck.toString(), "--allow-mismatch", "--beyond-max-positions");
        assertThat(forced.code()).as(forced.toString()).isZero();
    }

    @Test
    void aSlidingWindowOfZeroIsRefused() throws IOException {
        Path ck = tinyWith("\"sliding_window\": 8", "\"sliding_window\": 0");
        assertRefused(Cli.run("run", "--model", ck.toString(), "--tokens", "2,367", "-n", "2", "--ids"), ck.resolve("config.json"), "'sliding_window' = 0");
    }

    @Test
    void aVocabularyBeyondIntRangeIsRefusedNotWrappedNegative() throws IOException {
        Path ck = tinyWith("\"vocab_size\": 1024", "\"vocab_size\": 1e12");
        var r = Cli.run("run", "--model", ck.toString(), "--tokens", "2,367", "-n", "2", "--ids");
        assertRefused(r, ck.resolve("config.json"), "'vocab_size' = 1.0E12");
        assertThat(r.err()).doesNotContain("-727");
    }

    @Test
    void aKeyGivenTwiceIsRefusedNotLastOneWins() throws IOException {
        Path ck = tinyWith("\"sliding_window\": 8", "\"sliding_window\": 8, \"sliding_window\": 4096");
        assertRefused(Cli.run("run", "--model", ck.toString(), "--tokens", "2,367", "-n", "2", "--ids"), ck.resolve("config.json"), "sliding_window");
    }

    @Test
    void aVocabularyThatDisagreesWithTheEmbeddingIsRefused() throws IOException {
        Path ck = tinyWith("\"vocab_size\": 1024", "\"vocab_size\": 1000");
        assertRefused(Cli.run("run", "--model", ck.toString(), "--tokens", "2,367", "-n", "2", "--ids"), ck, "[1024, 128]");
    }
}
