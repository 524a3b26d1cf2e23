package dev.decodiff.llamacpp.gguf;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.llamacpp.ffi.LlamaContext;
import dev.decodiff.llamacpp.ffi.LlamaCppTestSupport;
import dev.decodiff.llamacpp.ffi.LlamaLibrary;
import dev.decodiff.llamacpp.ffi.LlamaModel;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * llama.cpp at llama-bench's settings (what {@code bench --against llama.cpp} times): batches of 2048 tokens computed
 * 512 at a time, flash attention auto, a polling threadpool of the context's own. It must still compute the model:
 * transformers' greedy tokens on the bundled long case, and a prompt longer than one batch, fed in batches and ubatches,
 * gives the same bits as the whole prompt in one ubatch.
 */
class LlamaBenchSchedulingTest {
    @TempDir
    Path tmp;

    @Test
    void llamaBenchSettingsResolveFlashAttentionOnAndGiveTransformersGreedyTokens() throws Exception {
        LlamaCppTestSupport.requireHome();
        Path gguf = tmp.resolve("tiny.gguf");
        HfToGguf.convert(Checkpoints.dir("gemma4-tiny"), gguf, GgufOutputType.F32, false);
        JsonNode manifest = new ObjectMapper().readTree(Checkpoints.root().resolve("reference-dumps/gemma4-tiny/long/manifest.json").toFile());
        int[] tokens = new ObjectMapper().convertValue(manifest.get("tokens"), int[].class);
        int prompt = manifest.get("prompt_length").asInt();
        var expected = new ArrayList<Integer>();
        manifest.get("steps").forEach(s -> expected.add(s.get("next_token").asInt()));

        var greedy = new ArrayList<Integer>();
        try (var m = LlamaModel.load(LlamaLibrary.get(), gguf, false);
             var ctx = new LlamaContext(m, LlamaContext.Options.llamaBench(256, 2, "f32", "f32"), null)) {
            // llama.cpp's CPU backend computes FLASH_ATTN_EXT, so "auto" must resolve to on, as llama-bench gets it
            assertThat(ctx.flashAttentionOn()).isTrue();
            greedy.add(argmax(ctx.decode(Arrays.copyOf(tokens, prompt), 0, false)));
            for (int s = 1; s < expected.size(); s++) greedy.add(argmax(ctx.decode(new int[]{tokens[prompt + s - 1]}, prompt + s - 1, false)));
        }
        assertThat(greedy).as("greedy tokens at llama-bench's settings").isEqualTo(expected);
    }

    @Test
    void aPromptLongerThanOneBatchFedInUbatchesGivesTheBitsOfTheWholePromptAtOnce() throws Exception {
        LlamaCppTestSupport.requireHome();
        Path gguf = tmp.resolve("tiny.gguf");
        HfToGguf.convert(Checkpoints.dir("gemma4-tiny"), gguf, GgufOutputType.F32, false);
        int n = LlamaContext.Scheduling.BENCH_BATCH + 300, room = LlamaContext.Options.lengthFor(n + 1);
        List<float[]> batched, whole;
        try (var m = LlamaModel.load(LlamaLibrary.get(), gguf, false)) {
            int[] prompt = new SplittableRandom(7).ints(n, 3, m.vocabSize()).toArray();
            // llama-bench's batching and threadpool with exact attention (flash attention sums in another order)
            batched = promptThenOneStep(m, new LlamaContext.Options(room, 2, "f32", "f32", LlamaContext.FlashAttention.OFF,
                    LlamaContext.Scheduling.LLAMA_BENCH), prompt);
            whole = promptThenOneStep(m, new LlamaContext.Options(room, 1, "f32", "f32", false), prompt);
        }
        // a batch fed at wrong positions would attend to other keys under other rotations
        for (int i = 0; i < 2; i++) assertThat(batched.get(i)).as("logits %d", i).isEqualTo(whole.get(i));
    }

    private static List<float[]> promptThenOneStep(LlamaModel m, LlamaContext.Options o, int[] prompt) {
        try (var ctx = new LlamaContext(m, o, null)) {
            float[] first = ctx.decode(prompt, 0, false);
            return List.of(first, ctx.decode(new int[]{argmax(first)}, prompt.length, false));
        }
    }

    private static int argmax(float[] v) {
        int best = 0;
        for (int i = 1; i < v.length; i++) if (v[i] > v[best]) best = i;
        return best;
    }
}
