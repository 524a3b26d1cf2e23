package dev.decodiff.harness.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.harness.SyntheticDump;
import dev.decodiff.harness.dump.CapturedTensor;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/** decodiff validate: one test per rule of docs/dump-format.md, each on a dump built to break exactly that rule. */
class ValidateCommandTest {
    @TempDir
    Path tmp;

    private Path dump(String name, SyntheticDump.Mutation m) { return SyntheticDump.write(tmp.resolve(name), m); }

    private static void editManifest(Path d, String from, String to) { SyntheticDump.editManifest(d, from, to); }

    private static CliTest.Run invalid(Path d, String... fragments) {
        var r = CliTest.run("validate", d.toString());
        assertThat(r.code()).as(r.out() + r.err()).isEqualTo(Main.BAD_INPUT);
        assertThat(r.out()).contains(d + ": INVALID");
        for (String f : fragments) assertThat(r.out()).contains(f);
        return r;
    }

    @Test
    void aDumpDecodiffWroteIsValid() throws Exception {
        Path d = dump("ok", SyntheticDump.NONE);
        var r = CliTest.run("validate", d.toString());
        assertThat(r.code()).as(r.out() + r.err()).isZero();
        assertThat(r.out()).contains("valid dump v1 (4 steps, " + (1 + SyntheticDump.LAYERS * 8 + 2) + " points, 3 layers)"); // embed, 8 per layer, final_norm, logits
        var j = new ObjectMapper().readTree(CliTest.run("validate", d.toString(), "--json").out());
        assertThat(j.get("valid").asBoolean()).isTrue();
        assertThat(j.get("problems")).isEmpty();
    }

    @Test
    void aMissingFolderOrManifestIsInvalid() throws IOException {
        invalid(tmp.resolve("nothing"), "does not exist");
        Path d = dump("no-manifest", SyntheticDump.NONE);
        Files.delete(d.resolve("manifest.json"));
        invalid(d, "manifest.json: missing");
    }

    @Test
    void aManifestBreakingTheSchemaIsInvalid() throws IOException {
        Path d = dump("schema", SyntheticDump.NONE);
        editManifest(d, "\"prompt_length\" : 5", "\"prompt_length\" : 0");
        invalid(d, "prompt_length 0 must be between 1 and the 9 tokens");
    }

    @Test
    void aDumpWithoutTheCompletenessMarkIsInvalid() throws IOException {
        Path d = dump("unmarked", SyntheticDump.NONE);
        editManifest(d, "\"complete\" : true", "\"complete\" : false");
        invalid(d, "no completeness mark");
    }

    @Test
    void everyBrokenStepFileIsListedNotJustTheFirst() throws IOException {
        Path d = dump("steps", SyntheticDump.NONE);
        Files.delete(d.resolve("step-0001.safetensors"));
        SyntheticDump.writeRaw(d.resolve("step-0002.safetensors"), "{}", 0);
        Path outside = tmp.resolve("outside.safetensors");
        Files.move(d.resolve("step-0003.safetensors"), outside);
        Files.createSymbolicLink(d.resolve("step-0003.safetensors"), outside);
        var r = invalid(d, "step-0001.safetensors: missing", "step-0002.safetensors: holds no tensors", "outside the dump folder");
        assertThat(r.out()).contains("3 problems");
    }

    @Test
    void aNonFloatTensorIsInvalid() throws IOException {
        Path d = dump("ints", SyntheticDump.NONE);
        SyntheticDump.writeRaw(d.resolve("step-0000.safetensors"),
                "{\"logits\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
        invalid(d, "dtype I32");
    }

    @Test
    void aPointInTheWrongShapeIsInvalid() {
        Path d = dump("shapes", (s, t) -> {
            if (s == 1) t.put("embed", new CapturedTensor("embed", new long[]{2, SyntheticDump.H}, new float[2 * SyntheticDump.H]));
            if (s == 2) t.put("layers.0.attn.k_read", new CapturedTensor("layers.0.attn.k_read", new long[]{99, SyntheticDump.NKV, SyntheticDump.D},
                    new float[99 * SyntheticDump.NKV * SyntheticDump.D]));
            if (s == 3) t.put("logits", new CapturedTensor("logits", new long[]{1, SyntheticDump.V}, new float[SyntheticDump.V]));
        });
        invalid(d, "'embed' has shape [2, 16]; expected [T, hidden] with T = 1",
                "'layers.0.attn.k_read' has shape [99, 2, 8]; expected [C, kv_heads, head_dim] with 1 ≤ C ≤ 7",
                "'logits' has shape [1, 50]; expected [vocab]");
    }

    @Test
    void aLayerBeyondNumHiddenLayersIsInvalid() throws IOException {
        Path d = dump("layers-over", SyntheticDump.NONE);
        editManifest(d, "\"num_hidden_layers\" : 3", "\"num_hidden_layers\" : 2");
        invalid(d, "\"model.num_hidden_layers\" is 2 but the steps hold 'layers.2.");
    }

    @Test
    void layersDeclaredButAbsentWithoutASelectionAreInvalid() throws IOException {
        Path d = dump("layers-under", SyntheticDump.NONE);
        editManifest(d, "\"num_hidden_layers\" : 3", "\"num_hidden_layers\" : 5");
        invalid(d, "declares 5 layers but no step holds a point of layer(s) 3–4");
    }

    @Test
    void aSelectionMustCoverThePointsTheDumpHolds() throws IOException {
        Path d = dump("selection", (s, t) -> t.keySet().removeIf(p -> !p.startsWith("layers.1.") && !p.equals("logits")));
        editManifest(d, "\"steps\" :", "\"selected_points\" : [ \"layers.1.*\" ],\n  \"steps\" :");
        invalid(d, "selected_points layers.1.* does not select logits");
        editManifest(d, "[ \"layers.1.*\" ]", "[ \"layers.1.*\", \"logits\" ]");
        assertThat(CliTest.run("validate", d.toString()).code()).isZero(); // a subset of layers is fine when selected
    }

    @Test
    void aStepLackingAPointTheOthersHoldIsInvalid() {
        Path d = dump("hole", (s, t) -> { if (s == 2) t.remove("layers.1.mlp.out"); });
        invalid(d, "step-0002.safetensors: lacks 1 point(s) other steps hold: layers.1.mlp.out");
    }

    @Test
    void aWidthThatChangesFromStepToStepIsInvalid() {
        Path d = dump("width", (s, t) -> {
            if (s == 3) t.put("layers.0.attn.q", new CapturedTensor("layers.0.attn.q", new long[]{1, SyntheticDump.NH, 4}, new float[SyntheticDump.NH * 4]));
        });
        invalid(d, "'layers.0.attn.q' has shape [1, 4, 4] but its trailing axes were [4, 8] at step 0");
    }

    @Test
    void pointsOutsideTheContractAreANoteNotAProblem() {
        Path d = dump("extra", (s, t) -> t.put("my.engine.scratch", new CapturedTensor("my.engine.scratch", new long[]{3}, new float[3])));
        var r = CliTest.run("validate", d.toString());
        assertThat(r.code()).as(r.out()).isZero();
        assertThat(r.out()).contains("note: 1 point(s) outside the contract names").contains("my.engine.scratch");
    }
}
