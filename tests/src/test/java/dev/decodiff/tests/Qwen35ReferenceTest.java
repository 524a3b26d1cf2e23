package dev.decodiff.tests;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.engine.CheckpointException;
import dev.decodiff.engine.CheckpointFiles;
import dev.decodiff.engine.arch.Architectures;
import dev.decodiff.engine.qwen35.Qwen35Architecture;
import dev.decodiff.engine.qwen35.Qwen35Model;
import dev.decodiff.engine.qwen35.Qwen35Session;
import dev.decodiff.harness.compare.Comparison;
import dev.decodiff.harness.compare.ToleranceProfile;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.live.ArchitectureCandidate;
import dev.decodiff.metal.SafetensorsWriter;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The Qwen3.5 engine (dense and MoE) against transformers 5.17's own float32 runs of the tiny checkpoints: greedy
 * tokens, every capture point teacher-forced, chunked prefill against the same tokens fed one at a time, and both
 * layouts of MoE expert weights.
 */
class Qwen35ReferenceTest {
    static final double LOGITS_TOLERANCE = 1e-4;

    static List<Path> cases() { return ReferenceCases.qwen35Cases(); }

    private static JsonNode manifest(Path dir) throws Exception {
        return new ObjectMapper().readTree(dir.resolve("manifest.json").toFile());
    }

    private static int[] tokens(JsonNode m, int from, int to) {
        var t = m.get("tokens");
        int[] out = new int[to - from];
        for (int i = from; i < to; i++) out[i - from] = t.get(i).asInt();
        return out;
    }

    /** The reference's logits at step s (last position of the step). */
    private static float[] referenceLogits(Path caseDir, int s) {
        try (var st = DumpReader.open(caseDir).readStep(s)) {
            return st.tensor("logits").toFloats();
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    void greedyDecodeReproducesTheReferenceTokens(Path caseDir) throws Exception {
        var m = manifest(caseDir);
        if (!"greedy".equals(m.path("mode").asText())) return; // teacher-forced cases have no greedy chain to follow
        var steps = m.get("steps");
        try (var model = Qwen35Model.load(ReferenceCases.checkpointOf(caseDir))) {
            var session = model.newSession(null);
            float[] logits = session.forward(tokens(m, 0, m.get("prompt_length").asInt()));
            var generated = new ArrayList<Integer>();
            for (int s = 0; s < steps.size(); s++) {
                int next = argmax(logits);
                generated.add(next);
                if (s + 1 < steps.size()) logits = session.forward(new int[]{next});
            }
            var expected = new ArrayList<Integer>();
            steps.forEach(st -> expected.add(st.get("next_token").asInt()));
            assertThat(generated).as("greedy tokens of %s", caseDir).isEqualTo(expected);
        }
    }

    /** Teacher-forced, every capture point at every step within the fp32 tolerance; logits within 1e-4 rel L2. */
    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    void teacherForcedEveryCapturePointMatches(Path caseDir) {
        var ref = DumpReader.open(caseDir);
        try (var model = Architectures.load(ReferenceCases.checkpointOf(caseDir))) {
            var points = ref.allPoints();
            var result = Comparison.run(ref, new ArchitectureCandidate(model, ref.manifest(), points::contains, true),
                    new Comparison.Options(ToleranceProfile.defaults(), false, s -> {}));
            assertThat(result.verdict()).as("verdict of %s", caseDir).isEqualTo("match");
            assertThat(result.observerEffect()).isEqualTo("none");
            double worstLogits = result.cells().stream().filter(c -> c.point().equals("logits")).mapToDouble(c -> c.relL2()).max().orElseThrow();
            assertThat(worstLogits).isLessThan(LOGITS_TOLERANCE);
            // every recurrent-path point was compared: the state hand-over is covered, not skipped
            for (String kind : List.of("linear.conv_state_read", "linear.state_read", "linear.state", "linear.core_out", "attn.gate"))
                assertThat(result.cells()).as(kind).anyMatch(c -> c.point().endsWith("." + kind));
            System.out.printf("qwen35 %s: worst logits rel L2 %.3e, worst cell %s at step %d: %.3e%n",
                    caseDir.getParent().getFileName() + "/" + caseDir.getFileName(), worstLogits,
                    result.worstCell().point(), result.worstCell().step(), result.worstCell().relL2());
        }
    }

    /**
     * A 70-token prompt prefilled in one step (two 64-token chunks) and fed one token at a time (the recurrent kernel
     * from the second token on) give the same logits and the same recurrent states to fp32 noise, and both agree with
     * transformers' prefill.
     */
    @Test
    void chunkedPrefillEqualsTokenByToken() throws Exception {
        for (String ck : List.of("qwen35-tiny", "qwen35-tiny-moe")) {
            Path caseDir = ReferenceCases.repoRoot().resolve("reference-dumps").resolve(ck).resolve("long");
            var m = manifest(caseDir);
            int[] prompt = tokens(m, 0, m.get("prompt_length").asInt());
            assertThat(prompt.length).isGreaterThan(64);
            try (var model = Qwen35Model.load(ReferenceCases.checkpointOf(caseDir))) {
                var chunked = model.newSession(null);
                float[] a = chunked.forward(prompt);
                var single = model.newSession(null);
                float[] b = null;
                for (int t : prompt) b = single.forward(new int[]{t});
                float[] ref = referenceLogits(caseDir, 0);
                double ab = GoldenTokenTest.relL2(a, b), ar = GoldenTokenTest.relL2(a, ref), br = GoldenTokenTest.relL2(b, ref);
                System.out.printf("qwen35 %s: chunked vs token by token %.3e; vs transformers %.3e / %.3e%n", ck, ab, ar, br);
                assertThat(ab).isLessThan(2e-5);
                assertThat(ar).isLessThan(2e-5);
                assertThat(br).isLessThan(2e-5);
                Qwen35Session.Snapshot sa = chunked.snapshot(), sb = single.snapshot();
                for (int i = 0; i < sa.rec().length; i++) {
                    if (sa.rec()[i] == null) continue;
                    assertThat(GoldenTokenTest.relL2(sb.rec()[i], sa.rec()[i])).as("recurrent state of layer %d", i).isLessThan(2e-5);
                    assertThat(GoldenTokenTest.relL2(sb.conv()[i], sa.conv()[i])).as("conv state of layer %d", i).isLessThan(2e-5);
                }
            }
        }
    }

    /**
     * The MoE checkpoint's fused experts (experts.gate_up_proj / down_proj, as released checkpoints store them)
     * rewritten per expert (experts.N.{gate,up,down}_proj.weight, as save_pretrained writes them) load to the same model.
     */
    @Test
    void perExpertLayoutLoadsLikeTheFusedOne(@TempDir Path tmp) throws Exception {
        Path src = ReferenceCases.repoRoot().resolve("checkpoints/qwen35-tiny-moe");
        var fused = Pattern.compile("(.*\\.mlp\\.experts)\\.(gate_up_proj|down_proj)");
        try (var f = CheckpointFiles.open(src); var w = new SafetensorsWriter()) {
            for (Map.Entry<String, dev.decodiff.metal.TensorView> e : f.stored().entrySet()) {
                var t = e.getValue();
                long[] shape = t.shape();
                float[] data = t.toFloats();
                var mt = fused.matcher(e.getKey());
                if (!mt.matches()) {
                    w.add(e.getKey(), shape, data);
                    continue;
                }
                int E = (int) shape[0], rows = (int) shape[1], cols = (int) shape[2];
                for (int x = 0; x < E; x++) {
                    float[] block = Arrays.copyOfRange(data, x * rows * cols, (x + 1) * rows * cols);
                    String base = mt.group(1) + "." + x + ".";
                    if (mt.group(2).equals("down_proj")) w.add(base + "down_proj.weight", new long[]{rows, cols}, block);
                    else {
                        int I = rows / 2;
                        w.add(base + "gate_proj.weight", new long[]{I, cols}, Arrays.copyOfRange(block, 0, I * cols));
                        w.add(base + "up_proj.weight", new long[]{I, cols}, Arrays.copyOfRange(block, I * cols, rows * cols));
                    }
                }
            }
            w.write(tmp.resolve("model.safetensors"), Map.of("format", "pt"));
        }
        Files.copy(src.resolve("config.json"), tmp.resolve("config.json"));
        Path caseDir = ReferenceCases.repoRoot().resolve("reference-dumps/qwen35-tiny-moe/long");
        var m = manifest(caseDir);
        int[] prompt = tokens(m, 0, m.get("prompt_length").asInt());
        try (var a = Qwen35Model.load(src); var b = Qwen35Model.load(tmp)) {
            float[] la = a.newSession(null).forward(prompt), lb = b.newSession(null).forward(prompt);
            assertThat(GoldenTokenTest.relL2(lb, la)).isLessThan(1e-6);
            assertThat(GoldenTokenTest.relL2(lb, referenceLogits(caseDir, 0))).isLessThan(2e-5);
        }
    }

    /**
     * mlx-lm's converted layout (the conv kernel as [C, K, 1], the +1 folded into the zero-centred norms, experts as
     * switch_mlp stacks; checkpoints/make_mlx_checkpoints.py, unquantized in fp32 so the fold loses nothing) is read as
     * the model it came from: every capture point of transformers' own reference of the original checkpoint matches.
     * Read as transformers' layout, its norms would be 2 + w.
     */
    @ParameterizedTest(name = "{0}")
    @org.junit.jupiter.params.provider.ValueSource(strings = {"qwen35-tiny", "qwen35-tiny-moe"})
    void mlxLmLayoutMatchesTheOriginalsReference(String checkpoint) throws Exception {
        Path root = ReferenceCases.repoRoot();
        var r = Cli.run("compare", root.resolve("reference-dumps/" + checkpoint + "/long").toString(),
                "--model", root.resolve("checkpoints/" + checkpoint + "-mlx-lm").toString(), "--allow-mismatch", "--json");
        assertThat(r.code()).as(r.toString()).isZero();
        assertThat(r.json().get("verdict").asText()).as(r.toString()).isEqualTo("match");
    }

    /** The registry picks Qwen3.5 by model_type, also through a multimodal wrapper's text_config. */
    @Test
    void registryChoosesByModelType() {
        var root = ReferenceCases.repoRoot().resolve("checkpoints");
        assertThat(Architectures.of(root.resolve("qwen35-tiny"))).isSameAs(Qwen35Architecture.INSTANCE);
        assertThat(Architectures.of(root.resolve("qwen35-tiny-moe"))).isSameAs(Qwen35Architecture.INSTANCE);
        assertThat(Architectures.of(root.resolve("gemma4-tiny")).name()).isEqualTo("Gemma 4");
    }

    /** Bad configs are refused with one line naming the field and the fix. */
    @Test
    void badConfigsAreRefusedNamingTheField(@TempDir Path tmp) throws Exception {
        var cfg = (com.fasterxml.jackson.databind.node.ObjectNode) new ObjectMapper().readTree(
                ReferenceCases.repoRoot().resolve("checkpoints/qwen35-tiny/config.json").toFile());
        record Bad(String field, Object value, String says) {}
        for (var bad : List.of(new Bad("linear_num_value_heads", 3, "linear_num_value_heads 3 is not a multiple of linear_num_key_heads 2"),
                new Bad("hidden_act", "gelu", "hidden_act 'gelu' is not supported"),
                new Bad("layer_types", List.of("linear_attention"), "layer_types must be a list of 4 entries"))) {
            var c = cfg.deepCopy();
            c.set(bad.field(), new ObjectMapper().valueToTree(bad.value()));
            Path f = tmp.resolve(bad.field() + ".json");
            Files.writeString(f, c.toString());
            assertThatThrownBy(() -> dev.decodiff.engine.qwen35.Qwen35Config.read(f))
                    .isInstanceOf(CheckpointException.class).hasMessageContaining(bad.says()).hasMessageNotContaining("\n");
        }
        Files.writeString(tmp.resolve("config.json"), "{\"model_type\": \"mamba\"}");
        assertThatThrownBy(() -> Architectures.of(tmp)).isInstanceOf(CheckpointException.class)
                .hasMessageContaining("model_type 'mamba' is not supported").hasMessageContaining("qwen3_5_moe_text");
    }

    private static int argmax(float[] v) {
        int best = 0;
        for (int j = 1; j < v.length; j++) if (v[j] > v[best]) best = j;
        return best;
    }
}
