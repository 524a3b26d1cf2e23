package dev.decodiff.harness.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.decodiff.harness.SyntheticDump;
import dev.decodiff.harness.dump.CapturedTensor;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * validate on dumps that follow another producer's convention: each is invalid (exit 2), and the line says which
 * convention it looks like and how to map it, naming the file.
 */
class ProducerConventionsTest {
    @TempDir
    Path tmp;

    private static CliTest.Run invalid(Path d, String... fragments) {
        var r = CliTest.run("validate", d.toString());
        assertThat(r.code()).as(r.out() + r.err()).isEqualTo(Main.BAD_INPUT);
        for (String f : fragments) assertThat(r.out() + r.err()).contains(f);
        return r;
    }

    /** The names transformers' modules have, where decodiff's capture points would be. */
    private static String huggingFace(String point) {
        return point.replace("embed", "model.embed_tokens").replace("final_norm", "model.norm").replace("logits", "lm_head")
                .replaceAll("^layers\\.(\\d+)\\.attn\\.q$", "model.layers.$1.self_attn.q_proj")
                .replaceAll("^layers\\.(\\d+)\\.attn\\.k$", "model.layers.$1.self_attn.k_proj")
                .replaceAll("^layers\\.(\\d+)\\.attn\\.v$", "model.layers.$1.self_attn.v_proj")
                .replaceAll("^layers\\.(\\d+)\\.attn\\.out$", "model.layers.$1.self_attn.o_proj")
                .replaceAll("^layers\\.(\\d+)\\.mlp\\.out$", "model.layers.$1.mlp")
                .replaceAll("^layers\\.(\\d+)\\.out$", "model.layers.$1")
                .replaceAll("^layers\\.(\\d+)\\.attn\\.(k|v)_read$", "model.layers.$1.self_attn.$2_cache");
    }

    @Test
    void huggingFaceModuleNamesAreNamedAndMapped() {
        Path d = SyntheticDump.write(tmp.resolve("hf"), (s, t) -> {
            var renamed = new LinkedHashMap<String, CapturedTensor>();
            for (var e : t.entrySet()) renamed.put(huggingFace(e.getKey()), new CapturedTensor(huggingFace(e.getKey()), e.getValue().shape(), e.getValue().data()));
            t.clear();
            t.putAll(renamed);
        });
        invalid(d, d.resolve("step-0000.safetensors") + ": ", "follow Hugging Face module names, not decodiff's capture points",
                "model.embed_tokens → embed", "model.layers.0.self_attn.q_proj → layers.0.attn.q (the query after q_norm and RoPE");
    }

    @Test
    void headsBeforeTokensIsNamedWithTheTranspose() {
        Path d = SyntheticDump.write(tmp.resolve("heads-first"), (s, t) -> transpose(t, "layers.1.attn.q"));
        invalid(d, "step-0000.safetensors: tensor 'layers.1.attn.q' has shape [4, 5, 8]",
                "it looks like [heads, T, head_dim] (the attention kernels' layout); decodiff's is [T, heads, head_dim]: swap the first two axes");
    }

    @Test
    void readsWithThePositionsOnTheSecondAxisAreNamed() {
        Path d = SyntheticDump.write(tmp.resolve("reads"), (s, t) -> transpose(t, "layers.0.attn.k_read"));
        invalid(d, "tensor 'layers.0.attn.k_read'", "it looks like [kv_heads, C, head_dim]");
    }

    @Test
    void aMissingStepIsNamed() throws IOException {
        Path d = SyntheticDump.write(tmp.resolve("gap"), SyntheticDump.NONE);
        editSteps(d, steps -> {
            steps.remove(2);
            for (int i = 0; i < steps.size(); i++) ((ObjectNode) steps.get(i)).put("index", i);
        });
        invalid(d, "steps[2].start is 7 but the previous steps end at position 6; steps must be contiguous — a step is missing: position 6 was fed by no listed step");
    }

    @Test
    void stepsCountedFromOneAreNamed() throws IOException {
        Path d = SyntheticDump.write(tmp.resolve("one-based"), SyntheticDump.NONE);
        editSteps(d, steps -> steps.forEach(s -> ((ObjectNode) s).put("index", s.get("index").asInt() + 1)));
        invalid(d, "steps[0].index is 1", "it looks like counting from 1: the prefill is step 0");
    }

    private static void transpose(Map<String, CapturedTensor> t, String point) {
        var c = t.get(point);
        long[] s = c.shape();
        float[] in = c.data(), out = new float[in.length];
        for (int a = 0; a < s[0]; a++)
            for (int b = 0; b < s[1]; b++)
                System.arraycopy(in, (int) ((a * s[1] + b) * s[2]), out, (int) ((b * s[0] + a) * s[2]), (int) s[2]);
        t.put(point, new CapturedTensor(point, new long[]{s[1], s[0], s[2]}, out));
    }

    private static void editSteps(Path d, java.util.function.Consumer<ArrayNode> edit) throws IOException {
        Path mf = d.resolve("manifest.json");
        var json = new ObjectMapper();
        var root = (ObjectNode) json.readTree(Files.readString(mf));
        edit.accept((ArrayNode) root.get("steps"));
        Files.writeString(mf, json.writeValueAsString(root));
    }
}
