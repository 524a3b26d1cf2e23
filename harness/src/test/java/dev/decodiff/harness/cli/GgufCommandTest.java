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
        assertThat(type.err()).contains("q4_K").contains("f32, bf16, f16, q8_0, q4_0, q4_k_m or q4_k_s");
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

    @Test
    void q4_K_MIsLlamaCppsOwnQuantizationWithItsFallbackWhereRowsHoldNoSuperBlock() throws Exception {
        org.junit.jupiter.api.Assumptions.assumeTrue(dev.decodiff.llamacpp.ffi.LlamaCppHome.available(),
                "llama.cpp is not set up: run scripts/llamacpp.sh to run the llama.cpp tests");
        Path out = tmp.resolve("tiny-q4km.gguf");
        var r = run("gguf", "--model", checkpoint("gemma4-tiny").toString(), "--out", out.toString(), "--type", "q4_k_m");
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).contains("wrote " + out).contains("Q4_K").contains("Q5_0");
        var g = GgufFile.read(out);
        // written by llama.cpp's quantizer: its file type (LLAMA_FTYPE_MOSTLY_Q4_K_M) and its per-tensor choices
        assertThat(g.get("general.file_type").asLong()).isEqualTo(15);
        assertThat(g.tensor("blk.0.ffn_down.weight").type()).as("rows of 256: one super-block").isIn(
                dev.decodiff.llamacpp.gguf.GgmlType.Q4_K, dev.decodiff.llamacpp.gguf.GgmlType.Q6_K);
        assertThat(g.tensor("blk.0.attn_q.weight").type()).as("rows of 128 fall back").isEqualTo(dev.decodiff.llamacpp.gguf.GgmlType.Q5_0);
        assertThat(g.tensor("blk.0.attn_norm.weight").type()).isEqualTo(dev.decodiff.llamacpp.gguf.GgmlType.F32);
        // the blocks hold the checkpoint's weights at 4-5 bits of precision
        try (var files = dev.decodiff.engine.CheckpointFiles.open(checkpoint("gemma4-tiny"))) {
            for (String[] pair : new String[][]{{"blk.0.ffn_down.weight", "layers.0.mlp.down_proj.weight"}, {"blk.0.attn_q.weight", "layers.0.self_attn.q_proj.weight"}}) {
                float[] want = files.get(pair[1]).toFloats(), got = g.floats(pair[0]);
                double num = 0, den = 0;
                for (int i = 0; i < want.length; i++) {
                    num += (got[i] - want[i]) * (double) (got[i] - want[i]);
                    den += want[i] * (double) want[i];
                }
                assertThat(Math.sqrt(num / den)).as(pair[0] + " rel L2 to the checkpoint").isBetween(1e-3, 0.12);
            }
        }
        var existing = run("gguf", "--model", checkpoint("gemma4-tiny").toString(), "--out", out.toString(), "--type", "q4_k_m");
        assertThat(existing.code()).isEqualTo(Main.BAD_INPUT);
        assertThat(existing.err()).contains("--force").hasLineCount(1);
        try (var left = Files.list(tmp)) {
            assertThat(left.map(p -> p.getFileName().toString())).as("no temporary file left").containsExactly("tiny-q4km.gguf");
        }
    }
}
