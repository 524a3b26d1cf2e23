package dev.decodiff.tests;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.decodiff.engine.CheckpointException;
import dev.decodiff.engine.arch.Architectures;
import dev.decodiff.engine.llama.LlamaArchitecture;
import dev.decodiff.engine.llama.LlamaConfig;
import dev.decodiff.engine.llama.LlamaModel;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The Llama-family engine (llama with llama3 RoPE scaling and biases; qwen3 with q/k norms and a tied head) against
 * transformers 5.17's own float32 runs of the tiny checkpoints: `decodiff compare` live on every reference, greedy
 * tokens, and configs the engine cannot honour refused in one line.
 */
class LlamaReferenceTest {
    /** fp32 against fp32: every cell of every step within this relative L2 of transformers' tensor. */
    static final double WORST_REL_L2 = 1e-5;

    static List<Path> cases() { return ReferenceCases.llamaCases(); }

    private static JsonNode manifest(Path dir) throws Exception {
        return new ObjectMapper().readTree(dir.resolve("manifest.json").toFile());
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    void liveCompareMatchesEveryCapturePoint(Path caseDir) throws Exception {
        var r = Cli.run("compare", caseDir.toString(), "--model", ReferenceCases.checkpointOf(caseDir).toString(), "--json");
        assertThat(r.code()).as(r.toString()).isZero();
        var j = r.json();
        assertThat(j.get("verdict").asText()).as(j.get("verdict_text").asText()).isEqualTo("match");
        assertThat(j.get("only_in_reference")).as("points the engine does not record").isEmpty();
        assertThat(j.get("only_in_candidate")).isEmpty();
        var worst = new ArrayList<JsonNode>();
        j.get("worst_by_kind").forEach(worst::add);
        // every kind of point was compared: embed, the eight per-layer kinds, final_norm, logits
        assertThat(j.get("worst_by_kind").size()).isEqualTo(11);
        var max = worst.stream().max(java.util.Comparator.comparingDouble(c -> c.get("rel_l2").asDouble())).orElseThrow();
        System.out.printf("llama %s: worst cell %s at step %d: rel L2 %.3e%n", caseDir.getParent().getFileName() + "/" + caseDir.getFileName(),
                max.get("point").asText(), max.get("step").asInt(), max.get("rel_l2").asDouble());
        assertThat(max.get("rel_l2").asDouble()).as("worst cell %s", max).isLessThanOrEqualTo(WORST_REL_L2);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    void greedyDecodeReproducesTheReferenceTokens(Path caseDir) throws Exception {
        var m = manifest(caseDir);
        if (!"greedy".equals(m.path("mode").asText())) return; // teacher-forced cases have no greedy chain to follow
        var steps = m.get("steps");
        int n = m.get("prompt_length").asInt();
        int[] prompt = new int[n];
        for (int i = 0; i < n; i++) prompt[i] = m.get("tokens").get(i).asInt();
        try (var model = LlamaModel.load(ReferenceCases.checkpointOf(caseDir))) {
            var session = model.newSession(null);
            float[] logits = session.forward(prompt);
            var generated = new ArrayList<Integer>();
            var expected = new ArrayList<Integer>();
            for (int s = 0; s < steps.size(); s++) {
                int next = argmax(logits);
                generated.add(next);
                expected.add(steps.get(s).get("next_token").asInt());
                if (s + 1 < steps.size()) logits = session.forward(new int[]{next});
            }
            assertThat(generated).as("greedy tokens of %s", caseDir).isEqualTo(expected);
            assertThat(steps.size()).isGreaterThan(5);
        }
    }

    /**
     * The RoPE tables (llama3-scaled for llama-tiny, whose three bands are all populated; default for qwen3-tiny) equal
     * the inv_freq transformers computed, which the producer recorded in each manifest, bit for bit.
     */
    @Test
    void ropeTablesEqualTransformers() throws Exception {
        for (String ck : List.of("llama-tiny", "qwen3-tiny")) {
            Path caseDir = ReferenceCases.repoRoot().resolve("reference-dumps").resolve(ck).resolve("short");
            var recorded = manifest(caseDir).get("rope").get("inv_freq");
            float[] expected = new float[recorded.size()];
            for (int j = 0; j < expected.length; j++) expected[j] = (float) recorded.get(j).asDouble();
            try (var model = LlamaModel.load(ReferenceCases.checkpointOf(caseDir))) {
                assertThat(model.rope().invFreq()).as(ck).isEqualTo(expected);
            }
        }
    }

    /** A snapshot after the prompt, restored after decoding on, gives the same next logits bit for bit. */
    @Test
    void snapshotRestoreReplaysExactly() throws Exception {
        Path caseDir = ReferenceCases.repoRoot().resolve("reference-dumps/llama-tiny/short");
        var m = manifest(caseDir);
        int[] prompt = new int[m.get("prompt_length").asInt()];
        for (int i = 0; i < prompt.length; i++) prompt[i] = m.get("tokens").get(i).asInt();
        try (var model = LlamaModel.load(ReferenceCases.checkpointOf(caseDir))) {
            var s = model.newSession(null);
            s.forward(prompt);
            var snap = s.snapshot();
            float[] a = s.forward(new int[]{5});
            s.forward(new int[]{6, 7});
            s.restore(snap);
            assertThat(s.position()).isEqualTo(prompt.length);
            assertThat(s.forward(new int[]{5})).isEqualTo(a);
        }
    }

    @Test
    void registryChoosesTheLlamaFamilyByModelType() {
        var root = ReferenceCases.repoRoot().resolve("checkpoints");
        assertThat(Architectures.of(root.resolve("llama-tiny"))).isSameAs(LlamaArchitecture.INSTANCE);
        assertThat(Architectures.of(root.resolve("qwen3-tiny"))).isSameAs(LlamaArchitecture.INSTANCE);
        assertThat(Architectures.supportedTypes()).contains("llama", "mistral", "qwen3");
    }

    /** An unsupported RoPE scaling stops `compare` with one line naming the file, the field and the fix, exit 2. */
    @Test
    void unsupportedRopeScalingIsRefusedInOneLine(@TempDir Path tmp) throws Exception {
        Path src = ReferenceCases.repoRoot().resolve("checkpoints/llama-tiny");
        for (String f : List.of("model.safetensors", "tokenizer.json", "tokenizer_config.json")) Files.copy(src.resolve(f), tmp.resolve(f));
        var cfg = (ObjectNode) new ObjectMapper().readTree(src.resolve("config.json").toFile());
        ((ObjectNode) cfg.get("rope_scaling")).put("rope_type", "yarn");
        Files.writeString(tmp.resolve("config.json"), cfg.toPrettyString());
        var r = Cli.run("compare", ReferenceCases.repoRoot().resolve("reference-dumps/llama-tiny/short").toString(), "--model", tmp.toString(), "--allow-mismatch");
        assertThat(r.code()).as(r.toString()).isEqualTo(2);
        String err = r.err().strip();
        assertThat(err).as(r.toString()).doesNotContain("\n").contains(tmp.resolve("config.json").toString())
                .contains("rope_scaling.rope_type 'yarn' is not supported").contains("\"llama3\"");
    }

    /** Configs the engine cannot honour are refused at parse time, naming the field and the fix. */
    @Test
    void badConfigsAreRefusedNamingTheField(@TempDir Path tmp) throws Exception {
        record Bad(String json, String says) {}
        for (var bad : List.of(
                new Bad("{\"model_type\":\"mistral\",\"sliding_window\":4096}", "sliding_window 4096 is not supported"),
                new Bad("{\"model_type\":\"mistral\"}", "sliding_window is absent"),
                new Bad("{\"model_type\":\"qwen3\",\"use_sliding_window\":true}", "use_sliding_window true is not supported"),
                new Bad("{\"model_type\":\"llama\",\"hidden_act\":\"gelu\"}", "hidden_act 'gelu' is not supported"),
                new Bad("{\"model_type\":\"llama\",\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8.0}}", "rope_scaling.low_freq_factor is missing"),
                new Bad("{\"model_type\":\"llama\",\"rope_parameters\":{\"rope_type\":\"dynamic\",\"rope_theta\":1e4}}", "rope_parameters.rope_type 'dynamic' is not supported"))) {
            Path f = tmp.resolve("config.json");
            Files.writeString(f, bad.json());
            assertThatThrownBy(() -> LlamaConfig.read(f)).isInstanceOf(CheckpointException.class)
                    .hasMessageContaining(f.toString()).hasMessageContaining(bad.says()).hasMessageNotContaining("\n");
        }
        // mistral with no window is the llama forward
        Files.writeString(tmp.resolve("config.json"), "{\"model_type\":\"mistral\",\"sliding_window\":null}");
        assertThat(LlamaConfig.read(tmp.resolve("config.json")).ropeScaling()).isNull();
    }

    private static int argmax(float[] v) {
        int best = 0;
        for (int j = 1; j < v.length; j++) if (v[j] > v[best]) best = j;
        return best;
    }
}
