package dev.decodiff.tests;

import dev.decodiff.harness.live.ObserverCheck;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.harness.compare.Comparison;
import dev.decodiff.harness.arch.gemma4.LocalAttribution;
import dev.decodiff.harness.compare.attribution.LocalError;
import dev.decodiff.harness.dump.CapturedTensor;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.arch.gemma4.LiveCandidate;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A verdict accounts for the whole disagreement, on both sides: the reference's own ops are recomputed from its own
 * recorded inputs too, so a reference whose producer has a bug, and a wrong description of the model that decodiff's
 * engine and its recomputation share, are both caught by the transformers reference (the independent oracle) — never
 * passed as precision.
 */
class SoundVerdictTest {
    static final ObjectMapper JSON = new ObjectMapper();
    static Path root, fp32;

    @TempDir
    Path tmp;

    @BeforeAll
    static void paths() {
        root = ReferenceCases.repoRoot();
        System.setProperty("decodiff.home", root.toString());
        fp32 = root.resolve("reference-dumps/gemma4-tiny/long");
    }

    static int steps(Path dump) throws Exception { return JSON.readTree(dump.resolve("manifest.json").toFile()).get("steps").size(); }

    @Test
    void aReferenceWhoseProducerReadsKeysAsValuesDisagreesWithTheDescriptionAgainstTheLiveEngine() throws Exception {
        // the producer's bug: on layer 2 (a full attention_k_eq_v layer) the values read back are the keys
        Path bug = DumpSurgery.copy(fp32, tmp.resolve("bug-ref"));
        for (int s = 0; s < steps(bug); s++)
            DumpSurgery.editStep(bug, s, t -> {
                var k = t.get("layers.2.attn.k_read");
                t.put("layers.2.attn.v_read", new CapturedTensor("layers.2.attn.v_read", k.shape(), k.data().clone()));
            });
        var r = Cli.run("compare", bug.toString(), "--json");
        assertThat(r.code()).as(r.toString()).isEqualTo(4);
        var j = r.json();
        assertThat(j.get("verdict").asText()).isEqualTo("reference_disagrees");
        var d = j.get("reference_disagreement");
        assertThat(d.get("step").asInt()).isZero();
        assertThat(d.get("point").asText()).isEqualTo("layers.2.attn.v_read");
        assertThat(d.get("reference_local").get("local_rel_l2").asDouble()).isGreaterThan(0.1);
        assertThat(j.get("verdict_text").asText()).contains("reference and decodiff's description of the model disagree")
                .contains("layers.2.attn.v_read").contains("exact on its own inputs");
        // the terminal says it in one word too
        var text = Cli.run("compare", bug.toString());
        assertThat(text.code()).isEqualTo(4);
        assertThat(text.out()).contains("REFERENCE DISAGREES");
    }

    @Test
    void aWrongDescriptionSharedByTheEngineAndItsRecomputationIsFoundByTheReference() throws Exception {
        // the sliding layers' RoPE θ taken from the full layers': read by the engine's forward and by the ops alike, so
        // every op recomputes "exactly" — only the transformers reference can tell
        Path ck = DumpSurgery.copy(root.resolve("checkpoints/gemma4-tiny"), tmp.resolve("ckpt"));
        Path config = ck.resolve("config.json");
        String c = Files.readString(config);
        String wrong = c.replace("\"rope_theta\": 10000.0", "\"rope_theta\": 1000000.0");
        assertThat(wrong).isNotEqualTo(c);
        Files.writeString(config, wrong);
        var ref = DumpReader.open(fp32);
        try (var m = Gemma4Model.load(ck);
             var live = LiveCandidate.forPoints(m, EngineOptions.defaults(), ref.manifest(), ref.allPoints(), ObserverCheck.OFF)) {
            var opt = Comparison.Options.defaults().withAttribution(new LocalAttribution(m, false), false);
            var r = Comparison.run(ref, live, opt);
            assertThat(r.verdict()).isEqualTo("reference_disagrees");
            assertThat(r.exitCode()).isEqualTo(4);
            var d = r.referenceDisagreement();
            assertThat(d.step()).isZero();
            assertThat(d.point()).isEqualTo("layers.0.attn.q");
            assertThat(r.attribution().of(0, "layers.0.attn.q").status()).isEqualTo(LocalError.Status.EXACT);
        }
    }

    @Test
    void anMoeProducerThatRecordsMlpOutButNotMoeOutIsAttributedAtItsLayersOut() throws Exception {
        Path ref = DumpSurgery.copy(root.resolve("reference-dumps/gemma4-tiny-moe/long"), tmp.resolve("moe-ref"));
        Path ck = root.resolve("checkpoints/gemma4-tiny-moe");
        Path cand = tmp.resolve("moe-bf16");
        var d = Cli.run("dump", "--model", ck.toString(), "--reference", ref.toString(), "--matmul", "bf16", "--out", cand.toString());
        assertThat(d.code()).as(d.toString()).isZero();
        for (Path p : new Path[]{ref, cand})
            for (int s = 0; s < steps(p); s++) DumpSurgery.editStep(p, s, t -> t.keySet().removeIf(k -> k.endsWith(".moe.out")));
        var r = Cli.run("compare", ref.toString(), cand.toString(), "--model", ck.toString(), "--json");
        var j = r.json();
        assertThat(j.get("failing_cells").asInt()).as("bf16 matmul inputs put cells over the fp32 defaults").isPositive();
        assertThat(j.get("verdict").asText()).as(r.toString()).isEqualTo("precision");
        assertThat(r.code()).isZero();
        JsonNode out = null;
        for (var x : j.get("attribution").get("cells"))
            if (x.get("point").asText().equals("layers.0.out") && x.get("step").asInt() == 0) out = x;
        assertThat(out).isNotNull();
        assertThat(out.get("granularity").asText()).contains("moe.out");
        assertThat(out.get("status").asText()).isIn("exact", "precision");
        // and a layer that computes something else is still found there
        Path bad = DumpSurgery.copy(cand, tmp.resolve("moe-bad"));
        for (int s = 0; s < steps(bad); s++)
            DumpSurgery.editStep(bad, s, t -> {
                var o = t.get("layers.1.out");
                float[] x = o.data().clone();
                for (int i = 0; i < x.length; i++) x[i] *= 1.05f;
                t.put("layers.1.out", new CapturedTensor("layers.1.out", o.shape(), x));
            });
        var b = Cli.run("compare", ref.toString(), bad.toString(), "--model", ck.toString(), "--json");
        assertThat(b.code()).as(b.toString()).isEqualTo(1);
        assertThat(b.json().get("first_divergence").get("point").asText()).isEqualTo("layers.1.out");
    }
}
