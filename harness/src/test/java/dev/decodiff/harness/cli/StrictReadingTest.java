package dev.decodiff.harness.cli;

import dev.decodiff.harness.SyntheticDump;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Damaged dumps that used to pass or crash: each is built here, and compare must refuse it with exit 2 and one line
 * naming the file — never "match", never an internal error.
 */
class StrictReadingTest {
    @TempDir
    Path tmp;

    private Path ref() { return SyntheticDump.write(tmp.resolve("ref"), SyntheticDump.NONE); }

    private Path cand() { return SyntheticDump.write(tmp.resolve("cand"), SyntheticDump.NONE); }

    private static void assertRefused(CliTest.Run r, Path file, String... fragments) {
        assertThat(r.code()).as(r.out() + r.err()).isEqualTo(Main.BAD_INPUT);
        assertThat(r.out()).doesNotContain("MATCH");
        assertThat(r.err()).doesNotContain("internal error").contains(file.toString());
        assertThat(r.err().strip().lines()).hasSize(1);
        for (String f : fragments) assertThat(r.err()).contains(f);
    }

    @Test
    void aShapeWhoseSizeOverflowsIsDamagedNotAnInternalError() throws IOException {
        Path c = cand(), f = c.resolve("step-0001.safetensors");
        SyntheticDump.writeRaw(f, "{\"logits\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,8]}}", 8);
        assertRefused(CliTest.run("compare", ref().toString(), c.toString()), f, "overflows");
    }

    @Test
    void aNonUtf8ByteInATensorNameIsRefusedInsteadOfSilentlyRenamingIt() throws IOException {
        Path c = cand(), f = c.resolve("step-0002.safetensors");
        SyntheticDump.replaceByte(f, "\"final_norm\"", 6, 0xff); // "final\xffnorm": same length, header length unchanged
        assertRefused(CliTest.run("compare", ref().toString(), c.toString()), f, "not valid UTF-8");
    }

    @Test
    void aTensorNamedTwiceInOneHeaderIsRefused() throws IOException {
        Path c = cand(), f = c.resolve("step-0000.safetensors");
        SyntheticDump.writeRaw(f, "{\"logits\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                + "\"logits\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 16);
        assertRefused(CliTest.run("compare", ref().toString(), c.toString()), f, "logits");
    }

    @Test
    void aStepFileWithAnEmptyHeaderIsAnErrorNotOnlyInTheReference() throws IOException {
        Path c = cand(), f = c.resolve("step-0003.safetensors");
        SyntheticDump.writeRaw(f, "{}", 0);
        assertRefused(CliTest.run("compare", ref().toString(), c.toString()), f, "holds no tensors");
        SyntheticDump.writeRaw(f, "{\"__metadata__\":{\"format\":\"pt\"}}", 0);
        assertRefused(CliTest.run("compare", ref().toString(), c.toString()), f, "holds no tensors");
    }

    @Test
    void aDuplicateManifestKeyIsRefusedInsteadOfLastOneWins() throws IOException {
        Path c = cand(), mf = c.resolve("manifest.json");
        String text = Files.readString(mf);
        Files.writeString(mf, text.replaceFirst("\"steps\" :", "\"steps\" : [ ],\n  \"steps\" :"));
        assertRefused(CliTest.run("compare", ref().toString(), c.toString()), mf, "Duplicate field 'steps'");
    }

    @Test
    void aManifestThatIsNotUtf8IsRefused() throws IOException {
        Path c = cand(), mf = c.resolve("manifest.json");
        SyntheticDump.replaceByte(mf, "synthetic", 0, 0xc3); // a lead byte followed by ASCII: malformed
        assertRefused(CliTest.run("compare", ref().toString(), c.toString()), mf, "not valid UTF-8");
    }

    @Test
    void numHiddenLayersBelowTheLayersPresentIsRefused() throws IOException {
        Path c = cand(), mf = c.resolve("manifest.json");
        Files.writeString(mf, Files.readString(mf).replace("\"num_hidden_layers\" : " + SyntheticDump.LAYERS, "\"num_hidden_layers\" : 2"));
        assertRefused(CliTest.run("compare", ref().toString(), c.toString()), mf, "\"model.num_hidden_layers\" is 2", "layers.2.");
    }

    @Test
    void numHiddenLayersAboveTheLayersPresentIsIncompleteNotAMatch() throws IOException {
        Path c = cand(), r = ref();
        for (Path d : new Path[]{c, r}) {
            Path mf = d.resolve("manifest.json");
            Files.writeString(mf, Files.readString(mf).replace("\"num_hidden_layers\" : " + SyntheticDump.LAYERS, "\"num_hidden_layers\" : 6"));
        }
        var run = CliTest.run("compare", r.toString(), c.toString());
        assertThat(run.code()).as(run.out() + run.err()).isEqualTo(Main.INCOMPLETE);
        assertThat(run.out()).contains("INCOMPLETE").contains("declares 6 layers but holds no point of layers 3–5");
    }

    @Test
    void aStepFileLinkedFromOutsideTheDumpFolderIsRefused() throws IOException {
        Path c = cand(), f = c.resolve("step-0001.safetensors");
        Path outside = tmp.resolve("elsewhere.safetensors");
        Files.move(f, outside);
        Files.createSymbolicLink(f, outside);
        assertRefused(CliTest.run("compare", ref().toString(), c.toString()), f, "outside the dump folder");
    }

    @Test
    void aManifestLinkedFromOutsideTheDumpFolderIsRefused() throws IOException {
        Path c = cand(), mf = c.resolve("manifest.json");
        Path outside = tmp.resolve("elsewhere-manifest.json");
        Files.move(mf, outside);
        Files.createSymbolicLink(mf, outside);
        assertRefused(CliTest.run("compare", ref().toString(), c.toString()), mf, "outside the dump folder");
    }

    @Test
    void aLinkThatStaysInsideTheFolderIsFine() throws IOException {
        Path c = cand(), f = c.resolve("step-0001.safetensors");
        Files.move(f, c.resolve("real-0001.bin"));
        Files.createSymbolicLink(f, Path.of("real-0001.bin"));
        var r = CliTest.run("compare", ref().toString(), c.toString());
        assertThat(r.code()).as(r.out() + r.err()).isEqualTo(Main.MATCH);
    }
}
