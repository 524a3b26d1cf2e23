package dev.decodiff.harness.cli;

import dev.decodiff.harness.Home;
import dev.decodiff.llamacpp.gguf.GgufFile;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;

import static dev.decodiff.harness.cli.CliTest.run;
import static org.assertj.core.api.Assertions.assertThat;

/** `decodiff gguf` and `decodiff inspect FILE.gguf` as a user runs them: exit codes, messages, files left alone. */
class GgufCommandTest {
    @TempDir
    Path tmp;

    static Path checkpoint(String name) { return Home.get().resolve("checkpoints").resolve(name); }

    @Test
    void theBundledCheckpointConvertsAndInspectShowsItsMetadataAndTensors() {
        Path out = tmp.resolve("tiny.gguf");
        var r = run("gguf", "--model", checkpoint("gemma4-tiny").toString(), "--out", out.toString(), "--type", "bf16");
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).contains("wrote " + out).contains("BF16").contains("vocabulary from tokenizer.json");
        assertThat(r.err()).as("no warning for a model llama.cpp pairs right").isEmpty();
        var i = run("inspect", out.toString());
        assertThat(i.code()).as(i.err()).isZero();
        assertThat(i.out()).contains("GGUF v3").contains("gemma4.attention.sliding_window_pattern")
                .contains("blk.5.attn_q.weight").contains("BF16");
    }

    @Test
    void anExistingOutputIsRefusedWithExitTwoAndKeptAsItWas() throws Exception {
        Path out = tmp.resolve("mine.gguf");
        Files.writeString(out, "not yours");
        var r = run("gguf", "--model", checkpoint("gemma4-tiny").toString(), "--out", out.toString());
        assertThat(r.code()).isEqualTo(Main.BAD_INPUT);
        assertThat(r.err()).contains(out.toString()).contains("--force").hasLineCount(1);
        assertThat(Files.readString(out)).isEqualTo("not yours");
        var forced = run("gguf", "--model", checkpoint("gemma4-tiny").toString(), "--out", out.toString(), "--force");
        assertThat(forced.code()).as(forced.err()).isZero();
        assertThat(GgufFile.read(out).metadata()).containsKey("gemma4.block_count");
    }

    @Test
    void anOutputInsideTheCheckpointOrAnUnknownTypeIsRefused() {
        var inside = run("gguf", "--model", checkpoint("gemma4-tiny").toString(), "--out",
                checkpoint("gemma4-tiny").resolve("x.gguf").toString(), "--force");
        assertThat(inside.code()).isEqualTo(Main.BAD_INPUT);
        assertThat(inside.err()).contains("--out is inside the input");
        assertThat(checkpoint("gemma4-tiny").resolve("x.gguf")).doesNotExist();
        var type = run("gguf", "--model", checkpoint("gemma4-tiny").toString(), "--out", tmp.resolve("q.gguf").toString(), "--type", "q4_K");
        assertThat(type.code()).isEqualTo(Main.BAD_INPUT);
        assertThat(type.err()).contains("q4_K").contains("f32, bf16, f16, q8_0 or q4_0");
    }

    @Test
    void anOutputThatIsInsideOrContainsTheCheckpointOrTheBundledDataIsRefusedEvenWithForce() throws Exception {
        Path hf = tmp.resolve("models").resolve("mine");
        Files.createDirectories(hf);
        for (String f : new String[]{"config.json", "model.safetensors"}) Files.copy(checkpoint("gemma4-tiny").resolve(f), hf.resolve(f));
        long weights = Files.size(hf.resolve("model.safetensors"));
        Path bundled = Home.get().resolve("reference-dumps").resolve("x.gguf");
        record Case(Path out, String how) {}
        for (var c : new Case[]{new Case(hf, "--out is the input"), new Case(hf.getParent(), "--out contains the input"),
                new Case(hf.resolve("model.safetensors"), "--out is inside the input"), new Case(bundled, "--out is inside the input")}) {
            var r = run("gguf", "--model", hf.toString(), "--out", c.out().toString(), "--force");
            assertThat(r.code()).as(c.out() + ": " + r.err()).isEqualTo(Main.BAD_INPUT);
            assertThat(r.err()).contains(c.how()).contains("--force does not change that").hasLineCount(1);
        }
        assertThat(Files.size(hf.resolve("model.safetensors"))).isEqualTo(weights);
        assertThat(bundled).doesNotExist();
    }

    @Test
    void aCheckpointWithoutTokenizerConvertsToIdsOnly() throws Exception {
        Path hf = tmp.resolve("no-tokenizer");
        Files.createDirectories(hf);
        for (String f : new String[]{"config.json", "model.safetensors"}) Files.copy(checkpoint("gemma4-tiny").resolve(f), hf.resolve(f));
        Path out = tmp.resolve("ids.gguf");
        var r = run("gguf", "--model", hf.toString(), "--out", out.toString());
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).contains("no vocabulary (token ids only)");
        var m = GgufFile.read(out).metadata();
        assertThat(m.get("tokenizer.ggml.model").asString()).isEqualTo("none");
        assertThat(m.get("gemma4.vocab_size").asLong()).isEqualTo(1024);
        assertThat(m).doesNotContainKey("tokenizer.ggml.tokens");
    }

    @Test
    void theKvSharingCheckpointWarnsThatLlamaCppPairsItsSharedLayersWithTheWrongCaches() {
        var r = run("gguf", "--model", checkpoint("gemma4-tiny-ple").toString(), "--out", tmp.resolve("ple.gguf").toString());
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.err()).contains("warning").contains("layer 4 reads layer 2's cache in llama.cpp but layer 3's in transformers")
                .contains("llama.cpp aborts");
    }

    @Test
    void aDamagedGgufIsRefusedByInspectNamingTheFile() throws Exception {
        Path out = tmp.resolve("cut.gguf");
        assertThat(run("gguf", "--model", checkpoint("gemma4-tiny").toString(), "--out", out.toString()).code()).isZero();
        byte[] b = Files.readAllBytes(out);
        Files.write(out, java.util.Arrays.copyOf(b, 1000));
        var r = run("inspect", out.toString());
        assertThat(r.code()).isEqualTo(Main.BAD_INPUT);
        assertThat(r.err()).contains(out.toString()).contains("truncated").hasLineCount(1);
    }
}
