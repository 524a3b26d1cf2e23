package dev.decodiff.tests;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.harness.compare.ToleranceProfile;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * `decodiff calibrate` on the committed bf16 twin of the default case: the profile it derives lets the bf16 reference
 * match the fp32 one (which the fp32 defaults call a divergence), and still catches a real bug live from the model.
 */
class CalibrateTest {
    static final ObjectMapper JSON = new ObjectMapper();
    static Path root, fp32, bf16, profile;

    @BeforeAll
    static void calibrate(@TempDir Path dir) throws Exception {
        root = ReferenceCases.repoRoot();
        System.setProperty("decodiff.home", root.toString());
        fp32 = root.resolve("reference-dumps/gemma4-tiny/long");
        bf16 = root.resolve("reference-dumps/gemma4-tiny/long-bf16");
        profile = dir.resolve("bf16-profile.json");
        var r = Cli.run("calibrate", fp32.toString(), bf16.toString(), "--out", profile.toString());
        assertThat(r.code()).as(r.toString()).isZero();
        assertThat(r.out()).contains("float32").contains("bfloat16").contains("attn.v_read").contains("near_tie").contains("wrote " + profile);
    }


    @Test
    void theProfileIsThreeTimesTheNoiseFloorPerKindAndLoadsAsAToleranceProfile() throws Exception {
        var p = JSON.readTree(Files.readString(profile));
        var loaded = ToleranceProfile.load(profile);
        var kinds = p.get("calibration").get("kinds");
        assertThat(kinds.size()).isEqualTo(11);
        for (var it = kinds.fields(); it.hasNext(); ) {
            var e = it.next();
            double max = e.getValue().get("max_rel_l2").asDouble(), tol = e.getValue().get("tolerance").asDouble();
            assertThat(max).as(e.getKey()).isGreaterThan(1e-3).isLessThan(0.2);         // bf16 noise, not a bug
            assertThat(tol).as(e.getKey()).isGreaterThanOrEqualTo(3 * max).isLessThan(3 * max * 1.1);
            assertThat(loaded.tolerance(e.getKey().equals("embed") || e.getKey().equals("logits") || e.getKey().equals("final_norm")
                    ? e.getKey() : "layers.3." + e.getKey())).as(e.getKey()).isEqualTo(tol);
        }
        assertThat(loaded.nearTie()).isEqualTo(p.get("near_tie").asDouble()).isGreaterThan(0.1).isLessThan(2.0);
    }

    @Test
    void theBf16ReferenceMatchesUnderTheProfileAndDivergesWithout() throws Exception {
        var with = Cli.run("compare", fp32.toString(), bf16.toString(), "--tolerance", profile.toString(), "--json");
        assertThat(with.code()).as(with.toString()).isZero();
        // every cell within the calibrated tolerances: a match, though the attribution still names the bf16 rounding
        var wj = with.json();
        assertThat(wj.get("failing_cells").asInt()).isZero();
        assertThat(wj.get("verdict").asText()).isEqualTo("match");
        assertThat(wj.get("attribution").get("precision_effects").get(0).get("explanation").asText()).startsWith("bf16 activations");
        // without it, judged by accumulated error alone, the first bf16 rounding (the embedding's, 1.9e-3 > 1e-5) is the divergence
        var accumulated = Cli.run("compare", fp32.toString(), bf16.toString(), "--json", "--no-attribution");
        assertThat(accumulated.code()).as(accumulated.toString()).isEqualTo(1);
        assertThat(accumulated.json().get("first_divergence").get("point").asText()).isEqualTo("embed");
        // with local attribution (the default: the checkpoint is bundled) every op is reproduced by bf16 rounding
        var attributed = Cli.run("compare", fp32.toString(), bf16.toString(), "--json");
        assertThat(attributed.code()).as(attributed.toString()).isZero();
        var j = attributed.json();
        assertThat(j.get("verdict").asText()).isEqualTo("precision");
        assertThat(j.get("first_divergence").isNull()).isTrue();
        var effects = j.get("attribution").get("precision_effects");
        assertThat(effects).hasSize(1);
        assertThat(effects.get(0).get("explanation").asText()).startsWith("bf16 activations");
        assertThat(effects.get(0).get("first").get("point").asText()).isEqualTo("embed");
        // --exact makes the precision effects fail
        var exact = Cli.run("compare", fp32.toString(), bf16.toString(), "--exact");
        assertThat(exact.code()).as(exact.toString()).isEqualTo(1);
        assertThat(exact.out()).contains("PRECISION (--exact)");
    }

    @Test
    void aCleanFp32EngineMatchesTheBf16ReferenceUnderTheProfile() throws Exception {
        var r = Cli.run("compare", bf16.toString(), "--tolerance", profile.toString(), "--no-observer-check", "--json");
        assertThat(r.code()).as(r.toString()).isZero();
    }

    @Test
    void aRealBugIsStillCaughtUnderTheCalibratedProfile() throws Exception {
        for (Path ref : new Path[]{fp32, bf16}) {
            var r = Cli.run("compare", ref.toString(), "--fault", "layer-scalar-ignored", "--tolerance", profile.toString(),
                    "--no-observer-check", "--json");
            assertThat(r.code()).as(r.toString()).isEqualTo(1);
            var fd = r.json().get("first_divergence");
            assertThat(fd.get("step").asInt()).isZero();
            assertThat(fd.get("point").asText()).isEqualTo("layers.0.out");
            assertThat(fd.get("rel_l2").asDouble()).isGreaterThan(2 * fd.get("tolerance").asDouble());
        }
    }

    @Test
    void perLayerToleranceIsTighterOnEarlyLayers(@TempDir Path dir) throws Exception {
        var out = dir.resolve("per-layer.json");
        var r = Cli.run("calibrate", fp32.toString(), bf16.toString(), "--out", out.toString(), "--per-layer", "--factor", "2");
        assertThat(r.code()).as(r.toString()).isZero();
        var p = ToleranceProfile.load(out);
        assertThat(p.tolerance("layers.0.out")).isLessThan(p.tolerance("layers.5.out"));
        assertThat(p.tolerance("layers.5.out")).isLessThanOrEqualTo(p.tolerance("out"));
        var c = Cli.run("compare", fp32.toString(), bf16.toString(), "--tolerance", out.toString());
        assertThat(c.code()).as(c.toString()).isZero();
    }

    @Test
    void refusesToOverwriteWithoutForceAndRefusesUnrelatedReferences(@TempDir Path dir) throws Exception {
        var out = dir.resolve("p.json");
        Files.writeString(out, "keep me");
        var r = Cli.run("calibrate", fp32.toString(), bf16.toString(), "--out", out.toString());
        assertThat(r.code()).isEqualTo(2);
        assertThat(r.err()).contains(out + ": exists; pass --force");
        assertThat(Files.readString(out)).isEqualTo("keep me");
        var forced = Cli.run("calibrate", fp32.toString(), bf16.toString(), "--out", out.toString(), "--force", "--json");
        assertThat(forced.code()).as(forced.toString()).isZero();
        assertThat(forced.json().get("points").get("logits").asDouble()).isPositive();
        assertThat(Files.readString(out)).startsWith("{");

        var other = Cli.run("calibrate", fp32.toString(), root.resolve("reference-dumps/gemma4-tiny-ple/long").toString(),
                "--out", dir.resolve("q.json").toString());
        assertThat(other.code()).isEqualTo(2);
        assertThat(other.err()).contains("another checkpoint").contains("calibration needs two references of one checkpoint");
        assertThat(dir.resolve("q.json")).doesNotExist();
        var missing = Cli.run("calibrate", fp32.toString(), bf16.toString());
        assertThat(missing.code()).isEqualTo(2);
        assertThat(missing.err()).contains("--out");
    }
}
