package dev.decodiff.harness.cli;

import dev.decodiff.harness.SyntheticDump;
import dev.decodiff.harness.TinyCheckpoint;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Bad input whose message used to be wrong or leak a library's internals: each is built here, and the command must
 * exit 2 with one line naming the file and saying what is wrong in words a user can act on.
 */
class PlainWordsTest {
    @TempDir
    Path tmp;

    private static void assertRefused(CliTest.Run r, Path file, String... fragments) {
        assertThat(r.code()).as(r.out() + r.err()).isEqualTo(Main.BAD_INPUT);
        assertThat(r.err()).doesNotContain("internal error").contains(file.toString());
        assertThat(r.err().strip().lines()).hasSize(1);
        for (String f : fragments) assertThat(r.err()).contains(f);
        // nothing of the JSON library's vocabulary
        assertThat(r.err()).doesNotContain("StreamReadConstraints").doesNotContain("ALLOW_").doesNotContain("Feature")
                .doesNotContain("`").doesNotContain("[Source:").doesNotContain("jackson");
    }

    // ---------------------------------------------------------------- tolerance-profile globs

    @Test
    void aProfileGlobThatMatchesNoPointIsRefusedNamingTheGlobAndTheFile() throws IOException {
        Path ref = SyntheticDump.write(tmp.resolve("ref"), SyntheticDump.NONE), cand = SyntheticDump.write(tmp.resolve("cand"), SyntheticDump.NONE);
        Path profile = tmp.resolve("profile.json");
        Files.writeString(profile, "{\"points\": {\"layers.1.*\": 1e-3, \"layer.2.*\": 1e-3}}");
        var r = CliTest.run("compare", ref.toString(), cand.toString(), "--tolerance", profile.toString());
        assertRefused(r, profile, "the glob \"layer.2.*\"", "matches no point of the reference (" + ref + ")");
        assertThat(r.err()).doesNotContain("\"layers.1.*\"");
        Files.writeString(profile, "{\"points\": {\"layers.1.*\": 1e-3, \"layers.2.attn.?\": 1e-3}}");
        var ok = CliTest.run("compare", ref.toString(), cand.toString(), "--tolerance", profile.toString());
        assertThat(ok.code()).as(ok.out() + ok.err()).isZero();
    }

    // ---------------------------------------------------------------- inspect: config against weights

    private Path checkpointWithConfig(String from, String to) throws IOException {
        Path ckpt = TinyCheckpoint.write(tmp.resolve("ckpt"));
        Path cfg = ckpt.resolve("config.json");
        String text = Files.readString(cfg);
        assertThat(text).contains(from);
        Files.writeString(cfg, text.replace(from, to));
        return ckpt;
    }

    @Test
    void inspectNamesAConfigThatDeclaresMoreLayersThanTheWeightsHold() throws IOException {
        Path ckpt = checkpointWithConfig("\"num_hidden_layers\": 3,", "\"num_hidden_layers\": 4,");
        Files.writeString(ckpt.resolve("config.json"), Files.readString(ckpt.resolve("config.json"))
                .replace("\"full_attention\"]", "\"full_attention\", \"sliding_attention\"]"));
        var r = CliTest.run("inspect", ckpt.toString());
        assertRefused(r, ckpt, "missing tensor 'model.layers.3.", "does not match its config.json");
        assertThat(r.out()).isEmpty();
        // run says the same of the same checkpoint
        var run = CliTest.run("run", "--model", ckpt.toString(), "--tokens", "1,2,3", "-n", "1", "--ids");
        assertThat(run.code()).isEqualTo(Main.BAD_INPUT);
        assertThat(run.err()).contains("missing tensor 'model.layers.3.");
    }

    @Test
    void inspectNamesAHeadDimTheWeightsDoNotHave() throws IOException {
        Path ckpt = checkpointWithConfig("\"head_dim\": 8,", "\"head_dim\": 4,");
        var r = CliTest.run("inspect", ckpt.toString());
        assertRefused(r, ckpt, "q_proj.weight", "config.json implies");
        assertThat(r.out()).isEmpty();
    }

    @Test
    void inspectOfAMatchingCheckpointStillDescribesIt() {
        Path ckpt = TinyCheckpoint.write(tmp.resolve("ok"));
        var r = CliTest.run("inspect", ckpt.toString());
        assertThat(r.code()).as(r.out() + r.err()).isZero();
        assertThat(r.out()).contains("3 layers").contains("weights    sha256");
    }

    // ---------------------------------------------------------------- JSON readers in plain words

    private Path cand() { return SyntheticDump.write(tmp.resolve("cand"), SyntheticDump.NONE); }

    private Path ref() { return SyntheticDump.write(tmp.resolve("ref"), SyntheticDump.NONE); }

    @Test
    void aNaNInTheManifestIsSaidPlainly() {
        Path c = cand(), mf = c.resolve("manifest.json");
        SyntheticDump.editManifest(c, "\"prompt_length\" : 5", "\"prompt_length\" : NaN");
        assertRefused(CliTest.run("compare", ref().toString(), c.toString()), mf, "NaN and Infinity are not JSON numbers", "at line");
        assertRefused(CliTest.run("inspect", c.toString()), mf, "NaN and Infinity are not JSON numbers");
    }

    @Test
    void aNumberOfThousandsOfDigitsIsSaidPlainly() {
        Path c = cand(), mf = c.resolve("manifest.json");
        SyntheticDump.editManifest(c, "\"prompt_length\" : 5", "\"prompt_length\" : " + "7".repeat(5000));
        assertRefused(CliTest.run("compare", ref().toString(), c.toString()), mf, "a number has more digits than a reader accepts");
    }

    @Test
    void nestingThousandsDeepIsSaidPlainly() {
        Path c = cand(), mf = c.resolve("manifest.json");
        SyntheticDump.editManifest(c, "\"prompt_length\" : 5", "\"prompt_length\" : 5, \"x\" : " + "[".repeat(3000) + "]".repeat(3000));
        assertRefused(CliTest.run("compare", ref().toString(), c.toString()), mf, "nest deeper than a reader accepts");
        var v = CliTest.run("validate", c.toString());
        assertThat(v.code()).isEqualTo(Main.BAD_INPUT);
        assertThat(v.out()).contains("nest deeper than a reader accepts").doesNotContain("StreamReadConstraints");
    }

    @Test
    void aCommentInTheManifestIsSaidWithoutTheParsersFeatureNames() {
        Path c = cand(), mf = c.resolve("manifest.json");
        SyntheticDump.editManifest(c, "\"prompt_length\" : 5", "/* note */ \"prompt_length\" : 5");
        assertRefused(CliTest.run("compare", ref().toString(), c.toString()), mf, "is not valid JSON");
    }

    @Test
    void aNaNInAToleranceProfileIsSaidPlainly() throws IOException {
        Path profile = tmp.resolve("p.json");
        Files.writeString(profile, "{\"default\": NaN}");
        assertRefused(CliTest.run("compare", ref().toString(), cand().toString(), "--tolerance", profile.toString()), profile,
                "NaN and Infinity are not JSON numbers");
    }

    @Test
    void aNaNInASafetensorsHeaderIsSaidPlainly() {
        Path c = cand(), f = c.resolve("step-0001.safetensors");
        SyntheticDump.writeRaw(f, "{\"logits\":{\"dtype\":\"F32\",\"shape\":[NaN],\"data_offsets\":[0,8]}}", 8);
        assertRefused(CliTest.run("compare", ref().toString(), c.toString()), f, "NaN and Infinity are not JSON numbers");
    }

    @Test
    void aNaNInAConfigIsSaidPlainly() throws IOException {
        Path ckpt = checkpointWithConfig("\"rms_norm_eps\": 1e-6", "\"rms_norm_eps\": NaN");
        assertRefused(CliTest.run("inspect", ckpt.toString()), ckpt.resolve("config.json"), "NaN and Infinity are not JSON numbers");
    }
}
