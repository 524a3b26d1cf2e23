package dev.decodiff.harness.dump;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.SyntheticDump;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.function.Consumer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class DumpReaderWriterTest {
    @TempDir
    Path tmp;

    private static final ObjectMapper JSON = new ObjectMapper();

    @Test
    void writesAndReadsBackEveryStep() {
        Path dir = SyntheticDump.write(tmp.resolve("d"), SyntheticDump.NONE);
        var r = DumpReader.open(dir);
        var m = r.manifest();
        assertThat(m.version()).isEqualTo(1);
        assertThat(m.format()).isEqualTo("decodiff-dump");
        assertThat(m.promptLength()).isEqualTo(SyntheticDump.PROMPT);
        assertThat(m.stepCount()).isEqualTo(SyntheticDump.STEPS);
        assertThat(m.step(1).file()).isEqualTo("step-0001.safetensors");
        assertThat(m.step(2).start()).isEqualTo(SyntheticDump.PROMPT + 1);
        assertThat(m.model().configSha256()).isEqualTo(SyntheticDump.CONFIG_SHA);
        assertThat(r.points(0)).contains("embed", "layers.2.attn.v_read", "logits");
        try (var s = r.readStep(1)) {
            var kr = s.tensor("layers.0.attn.k_read");
            assertThat(kr.shape()).containsExactly(SyntheticDump.PROMPT + 1, SyntheticDump.NKV, SyntheticDump.D);
            var expected = SyntheticDump.step(1, SyntheticDump.PROMPT, 1).get("layers.0.attn.k_read").data();
            assertThat(kr.toFloats()).containsExactly(expected);
        }
        assertThat(m.stepTokens(0)).hasSize(SyntheticDump.PROMPT);
        assertThat(m.stepTokens(1)).containsExactly(m.tokens().get(SyntheticDump.PROMPT));
    }

    @Test
    void manifestIsReadableAfterEveryStepSoACrashKeepsWhatWasWritten() {
        var w = DumpWriter.create(tmp.resolve("crash"), false, null,
                new DumpManifest.Model("gemma4_text", SyntheticDump.LAYERS, "c".repeat(64), null), List.of(2, 3, 4, 5), 3);
        var t = SyntheticDump.step(0, 0, 3);
        w.writeStep(0, 3, t.values(), 5, 1.0);
        // the producer dies here: what is on disk is a readable one-step dump, flagged as unfinished
        var r = DumpReader.open(tmp.resolve("crash"));
        assertThat(r.stepCount()).isEqualTo(1);
        assertThat(r.manifest().complete()).isFalse();
        assertThat(r.gaps()).singleElement().asString().contains(tmp.resolve("crash").toString()).contains("no completeness mark");
        w.finish();
        assertThat(DumpReader.open(tmp.resolve("crash")).gaps()).isEmpty();
        assertThat(r.manifest().model().weightsSha256()).isNull();
        try (var list = java.util.stream.Stream.of(tmp.resolve("crash").toFile().list())) {
            assertThat(list.filter(n -> n.endsWith(".partial"))).isEmpty();
        }
    }

    @Test
    void refusesNonEmptyFolderUnlessForced() throws IOException {
        Path dir = tmp.resolve("busy");
        Files.createDirectories(dir);
        Files.writeString(dir.resolve("notes.txt"), "mine");
        assertThatThrownBy(() -> DumpWriter.create(dir, false, null, new DumpManifest.Model("x", 1, "c".repeat(64), null), List.of(1), 1))
                .isInstanceOf(BadInputException.class).hasMessageContaining(dir.toString()).hasMessageContaining("--force");
        SyntheticDump.write(dir, SyntheticDump.NONE); // force=true inside
        assertThat(dir.resolve("notes.txt")).exists(); // force removes dump files only
        assertThat(DumpReader.open(dir).stepCount()).isEqualTo(SyntheticDump.STEPS);
    }

    // ------------------------------------------------------------------ bad input: each names the file

    private Path copy() { return SyntheticDump.write(tmp.resolve("bad"), SyntheticDump.NONE); }

    private void editManifest(Path dir, Consumer<ObjectNode> edit) throws IOException {
        Path mf = dir.resolve("manifest.json");
        var root = (ObjectNode) JSON.readTree(Files.readString(mf));
        edit.accept(root);
        Files.writeString(mf, JSON.writeValueAsString(root));
    }

    private void assertBad(Path dir, String file, String... fragments) {
        assertThatThrownBy(() -> DumpReader.open(dir))
                .isInstanceOf(BadInputException.class)
                .hasMessageContaining(file)
                .satisfies(e -> {
                    assertThat(e.getMessage()).doesNotContain("\n");
                    for (String f : fragments) assertThat(e.getMessage()).contains(f);
                });
    }

    @Test
    void truncatedStepFile() throws IOException {
        Path d = copy();
        Path f = d.resolve("step-0002.safetensors");
        try (var raf = new RandomAccessFile(f.toFile(), "rw")) { raf.setLength(raf.length() - 100); }
        assertBad(d, f.toString(), "truncated");
    }

    @Test
    void corruptedHeader() throws IOException {
        Path d = copy();
        Path f = d.resolve("step-0001.safetensors");
        byte[] b = Files.readAllBytes(f);
        for (int i = 8; i < 40; i++) b[i] = '#';
        Files.write(f, b);
        assertBad(d, f.toString(), "not one valid JSON object");
    }

    @Test
    void headerLengthBeyondFile() throws IOException {
        Path d = copy();
        Path f = d.resolve("step-0000.safetensors");
        byte[] b = Files.readAllBytes(f);
        b[7] = 0x7f;
        Files.write(f, b);
        assertBad(d, f.toString(), "header length");
    }

    @Test
    void manifestNotJson() throws IOException {
        Path d = copy();
        Files.writeString(d.resolve("manifest.json"), "{\"format\": \"decodiff-dump\", ");
        assertBad(d, d.resolve("manifest.json").toString(), "not valid JSON");
    }

    @Test
    void manifestMissing() throws IOException {
        Path d = copy();
        Files.delete(d.resolve("manifest.json"));
        assertBad(d, d.resolve("manifest.json").toString(), "missing");
    }

    @Test
    void unknownVersion() throws IOException {
        Path d = copy();
        editManifest(d, m -> m.put("version", 2));
        assertBad(d, "manifest.json", "unknown dump format version 2");
    }

    @Test
    void schemaViolations() throws IOException {
        record Case(String what, Consumer<ObjectNode> edit, String expect) {}
        var cases = List.of(
                new Case("format", m -> m.put("format", "other"), "\"format\""),
                new Case("version missing", m -> m.remove("version"), "\"version\""),
                new Case("version 1.5 (found by fuzzing: it read as 1)", m -> m.put("version", 1.5), "\"version\""),
                new Case("tokens not array", m -> m.put("tokens", "2,3"), "\"tokens\""),
                new Case("negative token", m -> ((com.fasterxml.jackson.databind.node.ArrayNode) m.get("tokens")).set(0, -1), "tokens[0]"),
                new Case("prompt_length", m -> m.put("prompt_length", 99), "prompt_length"),
                new Case("steps empty", m -> m.putArray("steps"), "\"steps\" is empty"),
                new Case("model missing", m -> m.remove("model"), "\"model\""),
                new Case("config sha", m -> ((ObjectNode) m.get("model")).put("config_sha256", "xyz"), "config_sha256"),
                new Case("step index", m -> ((ObjectNode) m.get("steps").get(2)).put("index", 7), "steps[2].index"),
                new Case("gap", m -> ((ObjectNode) m.get("steps").get(2)).put("start", 9), "contiguous"),
                new Case("step 0 length", m -> ((ObjectNode) m.get("steps").get(0)).put("length", 3), "prompt_length"),
                new Case("past tokens", m -> ((ObjectNode) m.get("steps").get(3)).put("length", 50), "only"),
                new Case("file path", m -> ((ObjectNode) m.get("steps").get(1)).put("file", "../x.safetensors"), "plain file name"),
                new Case("margin", m -> ((ObjectNode) m.get("steps").get(1)).put("top2_margin", "big"), "top2_margin"));
        for (var c : cases) {
            Path d = SyntheticDump.write(tmp.resolve("schema-" + c.what().replace(' ', '-')), SyntheticDump.NONE);
            editManifest(d, c.edit());
            assertBad(d, d.resolve("manifest.json").toString(), c.expect());
        }
    }

    @Test
    void manifestNamesMissingFile() throws IOException {
        Path d = copy();
        Files.delete(d.resolve("step-0003.safetensors"));
        assertBad(d, d.resolve("step-0003.safetensors").toString(), "missing", "manifest.json names it");
    }

    @Test
    void unknownFieldsAreIgnored() throws IOException {
        Path d = copy();
        editManifest(d, m -> {
            m.put("comment", "extra");
            ((ObjectNode) m.get("steps").get(0)).put("wall_ms", 12);
            ((ObjectNode) m.get("producer")).put("device", "cpu");
        });
        assertThat(DumpReader.open(d).stepCount()).isEqualTo(SyntheticDump.STEPS);
    }

    @Test
    void nonFloatTensorIsRefused() throws IOException {
        Path d = copy();
        Path f = d.resolve("step-0000.safetensors");
        String header = "{\"ids\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
        byte[] h = header.getBytes(StandardCharsets.UTF_8);
        var buf = java.nio.ByteBuffer.allocate(8 + h.length + 8).order(java.nio.ByteOrder.LITTLE_ENDIAN);
        buf.putLong(h.length).put(h).putInt(1).putInt(2);
        Files.write(f, buf.array());
        assertBad(d, f.toString(), "I32");
    }

    @Test
    void notAFolder() throws IOException {
        Path f = Files.writeString(tmp.resolve("file.txt"), "x");
        assertBad(f, f.toString(), "not a dump folder");
        assertBad(tmp.resolve("nope"), tmp.resolve("nope").toString(), "no such dump folder");
    }
}
