package dev.decodiff.tests;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * dump --points against the transformers reference: the selection is recorded, the points it leaves out are
 * excluded by choice (a match that says so), and a dump teacher-forced on such a dump inherits its selection.
 */
class PointSelectionTest {
    @TempDir Path tmp;

    @Test
    void aSelectedDumpMatchesWithTheExclusionStatedAndADumpOfItInheritsTheSelection() throws Exception {
        Path root = ReferenceCases.repoRoot(), ref = root.resolve("reference-dumps/gemma4-tiny/short");
        String model = root.resolve("checkpoints/gemma4-tiny").toString();
        Path sel = tmp.resolve("sel"), again = tmp.resolve("again");

        var d = Cli.run("dump", "--model", model, "--reference", ref.toString(), "--out", sel.toString(), "--points", "layers.5.*,logits");
        assertThat(d.code()).as(d.toString()).isZero();
        var m = new ObjectMapper().readTree(sel.resolve("manifest.json").toFile());
        assertThat(m.get("selected_points").toString()).isEqualTo("[\"layers.5.*\",\"logits\"]");
        assertThat(m.get("complete").asBoolean()).isTrue();

        var c = Cli.run("compare", ref.toString(), sel.toString(), "--json");
        assertThat(c.code()).as(c.toString()).isZero();
        var j = new ObjectMapper().readTree(c.out());
        assertThat(j.get("verdict").asText()).isEqualTo("match");
        assertThat(j.get("missing").get("excluded_by_selection").toString()).contains("\"embed\"").contains("layers.4.out").doesNotContain("logits");
        assertThat(j.get("notes").toString()).contains("excluded by choice");

        var d2 = Cli.run("dump", "--model", model, "--reference", sel.toString(), "--out", again.toString());
        assertThat(d2.code()).as(d2.toString()).isZero();
        assertThat(new ObjectMapper().readTree(again.resolve("manifest.json").toFile()).get("selected_points").toString())
                .isEqualTo("[\"layers.5.*\",\"logits\"]");
        assertThat(Cli.run("validate", again.toString()).code()).isZero();
        assertThat(Cli.run("compare", ref.toString(), again.toString()).code()).isZero();
    }

    @Test
    void pointsThatMatchNothingAreRefusedBeforeAnythingIsWritten() {
        Path root = ReferenceCases.repoRoot(), out = tmp.resolve("none");
        var d = Cli.run("dump", "--model", root.resolve("checkpoints/gemma4-tiny").toString(),
                "--reference", root.resolve("reference-dumps/gemma4-tiny/short").toString(), "--out", out.toString(), "--points", "layer.5.*");
        assertThat(d.code()).as(d.toString()).isEqualTo(2);
        assertThat(d.err()).contains("--points layer.5.* matches no capture point the reference holds");
        assertThat(out).doesNotExist();
    }
}
