package dev.decodiff.tests;

import com.fasterxml.jackson.databind.JsonNode;
import dev.decodiff.harness.dump.DumpReader;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * decodiff plan against what transformers recorded: a checkpoint's plan, made from its config.json alone, must name
 * exactly the points the transformers reference of that checkpoint holds, in the shapes it holds them at every step —
 * KV-shared layers without k/v, MoE layers with moe.out, PLE models with ple, sliding reads C = min(W, p+1).
 */
class CapturePlanTest {
    private static final Path ROOT = ReferenceCases.repoRoot();

    @Test
    void aCheckpointsPlanIsWhatTransformersRecordedForEveryBundledFloatCheckpoint() throws Exception {
        for (String ck : List.of("gemma4-tiny", "gemma4-tiny-moe", "gemma4-tiny-ple", "gemma4-tiny-ple-e2b")) {
            Path caseDir = ROOT.resolve("reference-dumps").resolve(ck).resolve("long");
            var ref = DumpReader.open(caseDir);
            var m = ref.manifest();
            var run = Cli.run("plan", "--model", ROOT.resolve("checkpoints").resolve(ck).toString(), "--prompt-length",
                    Integer.toString(m.promptLength()), "--decode-steps", Integer.toString(m.stepCount() - 1), "--json");
            assertThat(run.code()).as(run.toString()).isZero();
            JsonNode plan = run.json();
            assertThat(plan.get("model").get("config_sha256").asText()).as(ck).isEqualTo(m.model().configSha256());
            assertThat(plan.get("model").get("weights_sha256").asText()).as(ck).isEqualTo(m.model().weightsSha256());
            var names = new ArrayList<String>();
            plan.get("points").forEach(p -> names.add(p.get("name").asText()));
            assertThat(new TreeSet<>(names)).as(ck + ": the plan's points are the reference's").isEqualTo(new TreeSet<>(ref.allPoints()));
            for (var p : plan.get("points")) {
                String name = p.get("name").asText();
                for (int s = 0; s < m.stepCount(); s++)
                    assertThat(expected(p, plan, m.step(s).start(), m.step(s).length())).as(ck + " " + name + " at step " + s)
                            .containsExactly(ref.shape(s, name));
            }
        }
    }

    /** A plan point's shape at a step, by the rule the JSON states (what python/decodiff_dump.py computes). */
    private static long[] expected(JsonNode point, JsonNode plan, int start, int length) {
        var shape = point.get("shape");
        long[] out = new long[shape.size()];
        long p = start + length - 1L;
        for (int a = 0; a < out.length; a++) {
            var d = shape.get(a);
            if (d.isNumber()) out[a] = d.asLong();
            else if (d.asText().equals("T")) out[a] = length;
            else if (d.asText().equals("C")) {
                int w = point.get("read").get("window").asInt();
                out[a] = w > 0 ? Math.min(w, p + 1) : p + 1;
            } else out[a] = -1;
        }
        return out;
    }

    @Test
    void aReferencesPlanNamesItsStepsTokensAndWhatTheReadsHold() throws Exception {
        var run = Cli.run("plan", ROOT.resolve("reference-dumps/gemma4-tiny-ple/short").toString());
        assertThat(run.code()).as(run.toString()).isZero();
        // gemma4-tiny-ple: layers 4 and 5 share the caches of layers 3 (sliding) and 2 (full); window 8
        assertThat(run.out()).contains("step 0 prefills positions 0–6 (T = 7)")
                .contains("layer 4  sliding: positions max(0, p−7) … p (C = min(8, p+1)), oldest first; layer 3's cache")
                .contains("layer 5  full: positions 0 … p (C = p+1), oldest first; layer 2's cache")
                .containsPattern("ple +\\[T, num_hidden_layers, P\\] +\\[7, 6, 16\\] +\\[1, 6, 16\\] +required")
                .containsPattern("layers\\.0\\.attn\\.q +\\[T, heads, head_dim\\] +\\[7, 4, 32\\] +\\[1, 4, 32\\] +optional");
        var json = Cli.run("plan", ROOT.resolve("reference-dumps/gemma4-tiny-ple/short").toString(), "--json").json();
        assertThat(json.get("tokens")).hasSize(15);
        assertThat(json.get("steps")).hasSize(9);
    }

    @Test
    void planRefusesHalfAChoice() {
        var r = Cli.run("plan", "--model", ROOT.resolve("checkpoints/gemma4-tiny").toString());
        assertThat(r.code()).isEqualTo(2);
        assertThat(r.err()).contains("needs --prompt-length N and --decode-steps M");
        r = Cli.run("plan", ROOT.resolve("reference-dumps/gemma4-tiny/short").toString(), "--prompt-length", "3");
        assertThat(r.code()).isEqualTo(2);
        assertThat(r.err()).contains("go with --model alone");
    }
}
