package dev.decodiff.tests;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.harness.dump.CapturedTensor;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Local attribution on transformers' own bf16 run (reference-dumps/gemma4-tiny/long-bf16, made independently of
 * decodiff) as the candidate against its fp32 run: every difference is bf16 rounding and is named so, under the fp32
 * defaults; and the same bf16 run with a porting bug planted in it — a bug written into the dump's tensors, so the
 * cells downstream of it still hold transformers' numbers — is a divergence at the bug's own cell, not at the first
 * bf16 rounding (embed) and not hidden under a looser tolerance.
 */
class LocalAttributionTest {
    static final ObjectMapper JSON = new ObjectMapper();
    static Path root, fp32, bf16;

    @TempDir
    Path tmp;

    @BeforeAll
    static void paths() {
        root = ReferenceCases.repoRoot();
        System.setProperty("decodiff.home", root.toString());
        fp32 = root.resolve("reference-dumps/gemma4-tiny/long");
        bf16 = root.resolve("reference-dumps/gemma4-tiny/long-bf16");
    }

    static JsonNode compare(Path ref, Path cand, String... extra) throws Exception {
        var args = new ArrayList<>(List.of("compare", ref.toString(), cand.toString(), "--json"));
        args.addAll(List.of(extra));
        var r = Cli.run(args.toArray(String[]::new));
        assertThat(r.out()).as(r.toString()).startsWith("{");
        var j = JSON.readTree(r.out());
        assertThat(r.code()).as(r.toString()).isEqualTo(j.get("verdict").asText().equals("divergence") ? 1 : 0);
        return j;
    }

    static JsonNode cell(JsonNode j, int step, String point) {
        for (var c : j.get("attribution").get("cells"))
            if (c.get("step").asInt() == step && c.get("point").asText().equals(point)) return c;
        throw new AssertionError("no attributed cell " + step + " " + point);
    }

    @Test
    void transformersInBf16AgainstItsOwnFp32RunIsPrecisionNamingBf16Rounding() throws Exception {
        var j = compare(fp32, bf16);
        assertThat(j.get("verdict").asText()).isEqualTo("precision");
        assertThat(j.get("tolerance_profile").asText()).isEqualTo("built-in fp32 defaults");
        assertThat(j.get("failing_cells").asInt()).as("bf16 noise is over every fp32 tolerance").isGreaterThan(500);
        var effects = j.get("attribution").get("precision_effects");
        assertThat(effects).hasSize(1);
        assertThat(effects.get(0).get("explanation").asText()).startsWith("bf16 activations");
        // the embedding: bf16(E[id] · bf16(√H)) is reproduced exactly
        var embed = cell(j, 0, "embed");
        assertThat(embed.get("local_rel_l2").asDouble()).isGreaterThan(1e-3);
        assertThat(embed.get("leftover").asDouble()).isZero();
        for (var c : j.get("attribution").get("cells")) assertThat(c.get("status").asText()).as(c.toString()).isIn("exact", "precision");
    }

    @Test
    void aBf16EngineThatTakesTheValueAfterKNormAndRopeDivergesAtThatValue() throws Exception {
        // layer 2 is a full attention_k_eq_v layer: the value must be v_norm(raw k); the bug hands the cache the rotated keys
        Path bug = DumpSurgery.copy(bf16, tmp.resolve("kv"));
        int steps = JSON.readTree(bug.resolve("manifest.json").toFile()).get("steps").size();
        for (int s = 0; s < steps; s++)
            DumpSurgery.editStep(bug, s, t -> {
                var k = t.get("layers.2.attn.k");
                t.put("layers.2.attn.v", new CapturedTensor("layers.2.attn.v", k.shape(), k.data().clone()));
            });
        var j = compare(fp32, bug);
        assertThat(j.get("verdict").asText()).isEqualTo("divergence");
        var fd = j.get("first_divergence");
        assertThat(fd.get("step").asInt()).isZero();
        assertThat(fd.get("point").asText()).isEqualTo("layers.2.attn.v");
        // judged by accumulated error alone, the first cell is the first bf16 rounding; the jump ranking still points at v
        var acc = compare(fp32, bug, "--no-attribution");
        assertThat(acc.get("first_divergence").get("point").asText()).isEqualTo("embed");
        assertThat(acc.get("notes").toString()).contains("largest error jumps").contains("layers.2.attn.v at step");
        var local = cell(j, 0, "layers.2.attn.v");
        assertThat(local.get("status").asText()).isEqualTo("unexplained");
        assertThat(local.get("local_rel_l2").asDouble()).isGreaterThan(0.1);
        // the bf16 rounding before it is still named
        assertThat(j.get("attribution").get("precision_effects").get(0).get("explanation").asText()).startsWith("bf16 activations");
        assertThat(j.get("verdict_text").asText()).contains("Its own op adds rel L2");
    }

    @Test
    void aBf16EngineWithoutTheFinalSoftcapDivergesAtTheLogitsUnderTheDefaults() throws Exception {
        Path bug = DumpSurgery.copy(bf16, tmp.resolve("softcap"));
        int steps = JSON.readTree(bug.resolve("manifest.json").toFile()).get("steps").size();
        double cap = JSON.readTree(root.resolve("checkpoints/gemma4-tiny/config.json").toFile()).get("final_logit_softcapping").asDouble();
        for (int s = 0; s < steps; s++)
            DumpSurgery.editStep(bug, s, t -> {
                var l = t.get("logits");
                float[] raw = l.data().clone();
                for (int i = 0; i < raw.length; i++) raw[i] = (float) (cap * atanh(raw[i] / cap)); // the logits before the cap
                t.put("logits", new CapturedTensor("logits", l.shape(), raw));
            });
        // judged against the bf16 reference's own noise floor profile, the missing cap is inside tolerance
        var loose = compare(bf16, bug, "--no-attribution");
        assertThat(loose.get("verdict").asText()).isEqualTo("match");
        var j = compare(fp32, bug);
        assertThat(j.get("verdict").asText()).isEqualTo("divergence");
        assertThat(j.get("first_divergence").get("step").asInt()).isZero();
        assertThat(j.get("first_divergence").get("point").asText()).isEqualTo("logits");
        assertThat(cell(j, 0, "logits").get("status").asText()).isEqualTo("unexplained");
    }

    @Test
    void aProducerThatRecordsOnlyTheResidualStreamIsAttributedLayerByLayer() throws Exception {
        Path outs = DumpSurgery.copy(bf16, tmp.resolve("outs"));
        int steps = JSON.readTree(outs.resolve("manifest.json").toFile()).get("steps").size();
        for (int s = 0; s < steps; s++)
            DumpSurgery.editStep(outs, s, t -> t.keySet().removeIf(p -> p.startsWith("layers.") && !p.matches("layers\\.\\d+\\.out")));
        DumpSurgery.editManifest(outs, m -> m.replace("\"steps\"", "\"selected_points\": [\"embed\", \"layers.?.out\", \"final_norm\", \"logits\"],\n \"steps\""));
        var j = compare(fp32, outs);
        assertThat(j.get("verdict").asText()).isEqualTo("precision");
        var out = cell(j, 3, "layers.2.out");
        assertThat(out.get("granularity").asText()).contains("whole layer");
        assertThat(out.get("status").asText()).isIn("exact", "precision");
        // and a layer that computes something else is found, as a layer
        Path bug = DumpSurgery.copy(outs, tmp.resolve("outs-bug"));
        for (int s = 0; s < steps; s++)
            DumpSurgery.editStep(bug, s, t -> {
                var o = t.get("layers.3.out");
                float[] x = o.data().clone();
                for (int i = 0; i < x.length; i++) x[i] *= 1.25f; // the layer's scalar applied twice, say
                t.put("layers.3.out", new CapturedTensor("layers.3.out", o.shape(), x));
            });
        var b = compare(fp32, bug);
        assertThat(b.get("verdict").asText()).isEqualTo("divergence");
        assertThat(b.get("first_divergence").get("point").asText()).isEqualTo("layers.3.out");
        assertThat(b.get("first_divergence").get("step").asInt()).isZero();
    }

    @Test
    void withoutTheReferencesCheckpointAttributionIsOffAndTheReportSaysSo() throws Exception {
        Path other = DumpSurgery.copy(bf16, tmp.resolve("other"));
        Path ref = DumpSurgery.copy(fp32, tmp.resolve("ref"));
        // a reference of a checkpoint that is not bundled (its weights hash unknown here)
        for (Path d : List.of(ref, other))
            DumpSurgery.editManifest(d, m -> m.replaceFirst("\"weights_sha256\": \"[0-9a-f]+\"", "\"weights_sha256\": \"" + "0".repeat(64) + "\""));
        var r = Cli.run("compare", ref.toString(), other.toString());
        assertThat(r.code()).as(r.toString()).isEqualTo(1);
        assertThat(r.out()).contains("no local attribution").contains("--model");
        // another checkpoint, let through by --allow-mismatch, is no basis for attribution either
        var mismatched = Cli.run("compare", ref.toString(), other.toString(), "--model", root.resolve("checkpoints/gemma4-tiny").toString(),
                "--allow-mismatch");
        assertThat(mismatched.code()).as(mismatched.toString()).isEqualTo(1);
        assertThat(mismatched.out()).contains("the checkpoint is not the reference's");
    }

    @Test
    void modelNamesTheCheckpointForTwoDumps() throws Exception {
        Path copy = tmp.resolve("ckpt");
        DumpSurgery.copy(root.resolve("checkpoints/gemma4-tiny"), copy);
        var r = Cli.run("compare", fp32.toString(), bf16.toString(), "--model", copy.toString(), "--json");
        assertThat(r.code()).as(r.toString()).isZero();
        assertThat(JSON.readTree(r.out()).get("verdict").asText()).isEqualTo("precision");
    }

    static double atanh(double x) { return 0.5 * Math.log((1 + x) / (1 - x)); }
}
