package dev.decodiff.tests;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.harness.compare.Comparison;
import dev.decodiff.harness.compare.ToleranceProfile;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.arch.gemma4.LiveCandidate;
import dev.decodiff.metal.MatmulPrecision;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * --matmul bf16 (activations rounded to bf16, bf16 dot products) against the transformers fp32 reference: it is not
 * exact (every point kind after the embedding drifts past the fp32 tolerance), and it drifts less, per point kind,
 * than transformers itself computing the same tokens in bfloat16 (the committed long-bf16 twin), so the profile
 * `calibrate` derives from that twin accepts it.
 */
class MatmulBf16Test {
    static final ObjectMapper JSON = new ObjectMapper();
    static Path fp32, profile;

    @BeforeAll
    static void calibrate(@TempDir Path dir) {
        var root = ReferenceCases.repoRoot();
        System.setProperty("decodiff.home", root.toString());
        fp32 = root.resolve("reference-dumps/gemma4-tiny/long");
        profile = dir.resolve("bf16-profile.json");
        var r = Cli.run("calibrate", fp32.toString(), root.resolve("reference-dumps/gemma4-tiny/long-bf16").toString(), "--out", profile.toString());
        assertThat(r.code()).as(r.toString()).isZero();
    }

    /** The worst rel L2 per point kind (attn.q, …, logits) of the engine with bf16 matmuls against the fp32 reference. */
    private static Map<String, Double> worstPerKind() {
        var ref = DumpReader.open(fp32);
        var worst = new HashMap<String, Double>();
        try (var model = Gemma4Model.load(ReferenceCases.repoRoot().resolve("checkpoints/gemma4-tiny"));
             var live = LiveCandidate.forPoints(model, EngineOptions.defaults().withMatmul(MatmulPrecision.BF16), ref.manifest(), ref.allPoints(), false)) {
            var res = Comparison.run(ref, live, new Comparison.Options(ToleranceProfile.defaults(), false, null));
            for (var c : res.cells()) {
                String kind = c.point().startsWith("layers.") ? c.point().substring(c.point().indexOf('.', "layers.".length()) + 1) : c.point();
                worst.merge(kind, c.relL2(), Math::max);
            }
        }
        return worst;
    }

    @Test
    void bf16MatmulsDriftLessThanTransformersInBfloat16AtEveryPointKind() throws Exception {
        JsonNode kinds = JSON.readTree(Files.readString(profile)).get("calibration").get("kinds");
        var ours = worstPerKind();
        assertThat(ours.get("embed")).as("the embedding is a table lookup, no matmul").isZero();
        for (var it = kinds.fields(); it.hasNext(); ) {
            var e = it.next();
            if (e.getKey().equals("embed")) continue;
            double theirs = e.getValue().get("max_rel_l2").asDouble();
            assertThat(ours.get(e.getKey())).as(e.getKey()).isGreaterThan(1e-4).isLessThanOrEqualTo(theirs);
        }
    }

    @Test
    void theCalibratedBf16ProfileAcceptsItAndTheFp32DefaultsDoNot() throws Exception {
        var with = Cli.run("compare", fp32.toString(), "--matmul", "bf16", "--tolerance", profile.toString(), "--json");
        assertThat(with.code()).as(with.toString()).isZero();
        assertThat(JSON.readTree(with.out()).get("verdict").asText()).isEqualTo("match");
        var without = Cli.run("compare", fp32.toString(), "--matmul", "bf16", "--json", "--no-attribution");
        assertThat(without.code()).as(without.toString()).isEqualTo(1);
        // attributed, the bf16 products are named for what they are: every matmul's input rounded to bf16
        var attributed = Cli.run("compare", fp32.toString(), "--matmul", "bf16", "--json");
        assertThat(attributed.code()).as(attributed.toString()).isZero();
        var j = JSON.readTree(attributed.out());
        assertThat(j.get("verdict").asText()).isEqualTo("precision");
        assertThat(j.get("attribution").get("precision_effects").get(0).get("explanation").asText()).startsWith("matmul inputs rounded to bf16");
    }

    @Test
    void anUnknownPrecisionIsBadInput() {
        var r = Cli.run("run", "--model", ReferenceCases.repoRoot().resolve("checkpoints/gemma4-tiny").toString(), "--matmul", "int4", "--tokens", "2,3");
        assertThat(r.code()).as(r.toString()).isEqualTo(2);
        assertThat(r.err()).contains("--matmul").contains("fp32, fp32-fma, bf16");
    }
}
