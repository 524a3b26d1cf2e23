package dev.decodiff.harness.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.harness.SyntheticDump;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * decodiff validate --mark-complete: the mark is added only to a dump proven whole, atomically and without changing
 * any other byte; a dump it cannot prove whole, or one that already has the mark, is left exactly as it was.
 */
class MarkCompleteTest {
    @TempDir
    Path tmp;

    /** A whole dump as a producer from before the mark wrote it: no "complete" field at all. */
    private Path unmarked(String name) throws IOException {
        Path d = SyntheticDump.write(tmp.resolve(name), SyntheticDump.NONE);
        SyntheticDump.editManifest(d, ",\n  \"complete\" : true", "");
        assertThat(Files.readString(d.resolve("manifest.json"))).doesNotContain("complete");
        return d;
    }

    private static String manifest(Path d) throws IOException { return Files.readString(d.resolve("manifest.json")); }

    @Test
    void aWholeDumpWithoutTheMarkIsMarkedAndThenMatches() throws Exception {
        Path ref = SyntheticDump.write(tmp.resolve("ref"), SyntheticDump.NONE), d = unmarked("old");
        String before = manifest(d);
        assertThat(CliTest.run("compare", ref.toString(), d.toString()).code()).isEqualTo(Main.INCOMPLETE);
        var incomplete = CliTest.run("compare", ref.toString(), d.toString());
        assertThat(incomplete.out().replaceAll("\\s+", " ")).contains("decodiff validate --mark-complete " + d);

        var r = CliTest.run("validate", "--mark-complete", d.toString());
        assertThat(r.code()).as(r.out() + r.err()).isZero();
        assertThat(r.out()).contains("marked complete");
        String after = manifest(d);
        // exactly one insertion after the last field, every other byte kept
        int at = before.lastIndexOf(']') + 1;
        assertThat(after).isEqualTo(before.substring(0, at) + ",\n  \"complete\": true" + before.substring(at));
        assertThat(new ObjectMapper().readTree(after).get("complete").asBoolean()).isTrue();
        try (var files = Files.list(d)) {
            assertThat(files.map(p -> p.getFileName().toString())).noneMatch(n -> n.contains("partial"));
        }
        assertThat(CliTest.run("validate", d.toString()).code()).isZero();
        var m = CliTest.run("compare", ref.toString(), d.toString());
        assertThat(m.code()).as(m.out() + m.err()).isZero();
        assertThat(m.out()).contains("MATCH");
    }

    @Test
    void aMarkThatSaysFalseBecomesTrueInPlace() throws Exception {
        Path d = SyntheticDump.write(tmp.resolve("false"), SyntheticDump.NONE);
        SyntheticDump.editManifest(d, "\"complete\" : true", "\"complete\" : false");
        String before = manifest(d);
        var r = CliTest.run("validate", "--mark-complete", d.toString(), "--json");
        assertThat(r.code()).as(r.out() + r.err()).isZero();
        assertThat(new ObjectMapper().readTree(r.out()).get("marked").asBoolean()).isTrue();
        assertThat(manifest(d)).isEqualTo(before.replace("\"complete\" : false", "\"complete\" : true"));
    }

    @Test
    void aDumpKilledAfterTwoStepsIsNotMarked() throws Exception {
        Path d = SyntheticDump.unfinished(tmp.resolve("killed"), 2);
        String before = manifest(d);
        var r = CliTest.run("validate", "--mark-complete", d.toString());
        assertThat(r.code()).as(r.out() + r.err()).isEqualTo(Main.BAD_INPUT);
        assertThat(r.out()).contains("the steps feed positions 0–5 but \"tokens\" holds 9").contains("NOT marked complete");
        assertThat(manifest(d)).isEqualTo(before);
    }

    @Test
    void aDumpWithADamagedStepFileIsNotMarked() throws Exception {
        Path d = unmarked("damaged");
        SyntheticDump.writeRaw(d.resolve("step-0002.safetensors"), "{}", 0);
        String before = manifest(d);
        var r = CliTest.run("validate", "--mark-complete", d.toString());
        assertThat(r.code()).isEqualTo(Main.BAD_INPUT);
        assertThat(r.out()).contains("step-0002.safetensors: holds no tensors").contains("NOT marked complete");
        assertThat(manifest(d)).isEqualTo(before);
    }

    @Test
    void aDumpBreakingATensorRuleIsNotMarked() throws Exception {
        Path d = SyntheticDump.write(tmp.resolve("rows"), (s, t) -> {
            if (s == 2) t.put("embed", new dev.decodiff.harness.dump.CapturedTensor("embed", new long[]{3, SyntheticDump.H}, new float[3 * SyntheticDump.H]));
        });
        SyntheticDump.editManifest(d, ",\n  \"complete\" : true", "");
        String before = manifest(d);
        var r = CliTest.run("validate", "--mark-complete", d.toString());
        assertThat(r.code()).isEqualTo(Main.BAD_INPUT);
        assertThat(r.out()).contains("expected [T, hidden] with T = 1").contains("NOT marked complete");
        assertThat(manifest(d)).isEqualTo(before);
    }

    @Test
    void aDumpThatIsAlreadyMarkedIsLeftAsItIs() throws Exception {
        Path d = SyntheticDump.write(tmp.resolve("marked"), SyntheticDump.NONE);
        Path mf = d.resolve("manifest.json");
        var time = Files.getLastModifiedTime(mf);
        String before = manifest(d);
        var r = CliTest.run("validate", "--mark-complete", d.toString());
        assertThat(r.code()).isZero();
        assertThat(r.out()).contains("already carries the completeness mark; manifest.json left as it is");
        assertThat(manifest(d)).isEqualTo(before);
        assertThat(Files.getLastModifiedTime(mf)).isEqualTo(time);
    }

    @Test
    void aProducersPartialManifestBesideItMeansHandsOff() throws Exception {
        Path d = unmarked("writing");
        Files.writeString(d.resolve("manifest.json.partial"), "{}");
        String before = manifest(d);
        var r = CliTest.run("validate", "--mark-complete", d.toString());
        assertThat(r.code()).isEqualTo(Main.BAD_INPUT);
        assertThat(r.err()).contains("manifest.json.partial: exists: a producer may be writing this dump right now");
        assertThat(manifest(d)).isEqualTo(before);
    }

    @Test
    void aBundledReferenceWithoutItsMarkIsMarkedBackToTheSameManifest() throws Exception {
        Path src = dev.decodiff.harness.Home.get().resolve("reference-dumps/gemma4-tiny/short"), d = tmp.resolve("short");
        Files.createDirectories(d);
        try (var files = Files.list(src)) {
            for (Path f : files.toList()) Files.copy(f, d.resolve(f.getFileName()));
        }
        var original = new ObjectMapper().readTree(manifest(d));
        assertThat(original.get("complete").asBoolean()).isTrue();
        var stripped = (com.fasterxml.jackson.databind.node.ObjectNode) original.deepCopy();
        stripped.remove("complete");
        Files.writeString(d.resolve("manifest.json"), new ObjectMapper().writerWithDefaultPrettyPrinter().writeValueAsString(stripped));
        var r = CliTest.run("validate", "--mark-complete", d.toString());
        assertThat(r.code()).as(r.out() + r.err()).isZero();
        assertThat(new ObjectMapper().readTree(manifest(d))).isEqualTo(original);
    }

    @Test
    void aManifestThatIsALinkIsNotReplacedByAFile() throws Exception {
        Path d = unmarked("linked"), mf = d.resolve("manifest.json"), real = d.resolve("real-manifest.json");
        Files.move(mf, real);
        Files.createSymbolicLink(mf, Path.of("real-manifest.json"));
        String before = Files.readString(real);
        var r = CliTest.run("validate", "--mark-complete", d.toString());
        assertThat(r.code()).isEqualTo(Main.BAD_INPUT);
        assertThat(r.err()).contains(mf + ": is a symbolic link; not marked");
        assertThat(Files.isSymbolicLink(mf)).isTrue();
        assertThat(Files.readString(real)).isEqualTo(before);
    }
}
