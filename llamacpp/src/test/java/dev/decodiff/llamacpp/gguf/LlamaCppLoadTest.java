package dev.decodiff.llamacpp.gguf;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.llamacpp.ffi.LlamaContext;
import dev.decodiff.llamacpp.ffi.LlamaLibrary;
import dev.decodiff.llamacpp.ffi.LlamaModel;
import dev.decodiff.llamacpp.ffi.LlamaCppTestSupport;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The converted files in the real llama.cpp: they load, and llama.cpp's greedy token at every step of the bundled
 * long case is the one transformers chose (the reference manifest's next_token; the bundled models' top-2 margins are
 * ≥ 2.6, far above any rounding). The file without a vocabulary gives bit-identical logits.
 * gemma4-tiny-ple is left out: llama.cpp v0.5.0 aborts on its KV-sharing layout (see KvSharing).
 */
class LlamaCppLoadTest {
    @TempDir
    Path tmp;

    @ParameterizedTest
    @ValueSource(strings = {"gemma4-tiny", "gemma4-tiny-moe"})
    void llamaCppRunsTheF32FileToTransformersGreedyTokensWithOrWithoutAVocabulary(String checkpoint) throws Exception {
        LlamaCppTestSupport.requireHome();
        Path dir = Checkpoints.dir(checkpoint);
        Path withVocab = tmp.resolve("v.gguf"), idsOnly = tmp.resolve("ids.gguf");
        HfToGguf.convert(dir, withVocab, GgufOutputType.F32, false);
        Path bare = Files.createDirectories(tmp.resolve(checkpoint));
        for (String f : new String[]{"config.json", "model.safetensors"}) Files.copy(dir.resolve(f), bare.resolve(f));
        HfToGguf.convert(bare, idsOnly, GgufOutputType.F32, false);

        JsonNode manifest = new ObjectMapper().readTree(Checkpoints.root().resolve("reference-dumps").resolve(checkpoint)
                .resolve("long/manifest.json").toFile());
        int[] tokens = new ObjectMapper().convertValue(manifest.get("tokens"), int[].class);
        var expected = new ArrayList<Integer>();
        manifest.get("steps").forEach(s -> expected.add(s.get("next_token").asInt()));
        int prompt = manifest.get("prompt_length").asInt();

        var a = decode(withVocab, tokens, prompt, expected.size());
        var b = decode(idsOnly, tokens, prompt, expected.size());
        assertThat(a.stream().map(LlamaCppLoadTest::argmax).toList()).as("llama.cpp's greedy tokens").isEqualTo(expected);
        for (int s = 0; s < a.size(); s++) assertThat(Arrays.equals(a.get(s), b.get(s))).as("step %d: same logits without a vocabulary", s).isTrue();
    }

    /** Teacher-forced: the prompt in one batch, then one reference token per step; the logits of each step. */
    private static List<float[]> decode(Path gguf, int[] tokens, int prompt, int steps) {
        var out = new ArrayList<float[]>();
        try (var m = LlamaModel.load(LlamaLibrary.get(), gguf, false);
             var ctx = new LlamaContext(m, LlamaContext.Options.exact(256), null)) {
            out.add(ctx.decode(Arrays.copyOf(tokens, prompt), 0, false));
            for (int s = 1; s < steps; s++) out.add(ctx.decode(new int[]{tokens[prompt + s - 1]}, prompt + s - 1, false));
        }
        return out;
    }

    private static int argmax(float[] v) {
        int best = 0;
        for (int i = 1; i < v.length; i++) if (v[i] > v[best]) best = i;
        return best;
    }
}
