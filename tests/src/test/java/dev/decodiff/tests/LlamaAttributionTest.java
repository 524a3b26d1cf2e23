package dev.decodiff.tests;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.harness.dump.CapturedTensor;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Local attribution on the Llama family (llama-tiny: llama3 RoPE, attention and MLP biases; qwen3-tiny: q/k norms),
 * against data transformers wrote: its fp32 runs, the same runs stored in bf16 or fp16 (a candidate whose every
 * recorded tensor is rounded to that dtype, as a dump writer in it keeps them), and the same runs with a bug planted
 * in one cell. No candidate here is decodiff's own output. The engine still matches its references with every cell
 * judged; the fp32 run as a candidate is exact at every op; the bf16- or fp16-stored run is precision, every op
 * reproduced or inside that dtype's envelope and named so; a planted scale of one op's output is the divergence at
 * that cell with its op unexplained, on top of bf16 noise too; a reference so edited is named reference_disagrees
 * against the engine.
 */
class LlamaAttributionTest {
    static final ObjectMapper JSON = new ObjectMapper();
    static Path root;

    @TempDir
    Path tmp;

    @BeforeAll
    static void paths() {
        root = ReferenceCases.repoRoot();
        System.setProperty("decodiff.home", root.toString());
    }

    static Path ref(String model) { return root.resolve("reference-dumps/" + model + "/continuation"); }

    static JsonNode compare(int code, String... args) throws Exception {
        var all = new ArrayList<>(List.of("compare"));
        all.addAll(List.of(args));
        all.add("--json");
        var r = Cli.run(all.toArray(String[]::new));
        assertThat(r.out()).as(r.toString()).startsWith("{");
        assertThat(r.code()).as(r.toString()).isEqualTo(code);
        return JSON.readTree(r.out());
    }

    static JsonNode cell(JsonNode j, int step, String point) {
        for (var c : j.get("attribution").get("cells"))
            if (c.get("step").asInt() == step && c.get("point").asText().equals(point)) return c;
        throw new AssertionError("no attributed cell " + step + " " + point);
    }

    static int steps(Path dump) throws Exception {
        try (var s = Files.list(dump)) {
            return (int) s.filter(p -> p.getFileName().toString().startsWith("step-")).count();
        }
    }

    /** Every recorded tensor rounded to bf16 or fp16 (round to nearest even), the manifest stating that dtype. */
    static Path storedIn(String dtype, Path src, Path dst) throws Exception {
        boolean bf16 = dtype.equals("bfloat16");
        DumpSurgery.copy(src, dst);
        for (int s = 0; s < steps(dst); s++)
            DumpSurgery.editStep(dst, s, ts -> ts.replaceAll((n, t) -> {
                float[] d = t.data().clone();
                for (int i = 0; i < d.length; i++) {
                    int b = Float.floatToRawIntBits(d[i]);
                    d[i] = bf16 ? Float.intBitsToFloat((b + 0x7FFF + ((b >>> 16) & 1)) & 0xFFFF0000) : Float.float16ToFloat(Float.floatToFloat16(d[i]));
                }
                return new CapturedTensor(t.point(), t.shape(), d);
            }));
        DumpSurgery.editManifest(dst, m -> m.replace("\"dtype\": \"float32\"", "\"dtype\": \"" + dtype + "\""));
        return dst;
    }

    /** The point's tensor scaled by {@code factor} at every step: a bug in the op that makes it. */
    static Path scaled(Path dir, String point, float factor) throws Exception {
        for (int s = 0; s < steps(dir); s++)
            DumpSurgery.editStep(dir, s, ts -> {
                var t = ts.get(point);
                float[] d = t.data().clone();
                for (int i = 0; i < d.length; i++) d[i] *= factor;
                ts.put(point, new CapturedTensor(point, t.shape(), d));
            });
        return dir;
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"llama-tiny", "qwen3-tiny"})
    void theEngineMatchesItsReferenceWithItsOpsDescribed(String model) throws Exception {
        var j = compare(0, ref(model).toString(), "--model", root.resolve("checkpoints/" + model).toString());
        assertThat(j.get("verdict").asText()).isEqualTo("match");
        for (var n : j.get("notes")) assertThat(n.asText()).doesNotContain("no local attribution");
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"llama-tiny", "qwen3-tiny"})
    void transformersFp32AsTheCandidateIsExactAtEveryOp(String model) throws Exception {
        var j = compare(0, ref(model).toString(), ref(model).toString(), "--model", root.resolve("checkpoints/" + model).toString());
        assertThat(j.get("verdict").asText()).isEqualTo("match");
        var cells = j.get("attribution").get("cells");
        assertThat(cells.size()).as("every cell of a third-party candidate is measured").isEqualTo(j.get("cells").asInt());
        for (var c : cells) assertThat(c.get("status").asText()).as(c.toString()).isEqualTo("exact");
    }

    @ParameterizedTest(name = "{0} {1}")
    @CsvSource({"llama-tiny, bfloat16, bf16", "qwen3-tiny, bfloat16, bf16", "llama-tiny, float16, fp16", "qwen3-tiny, float16, fp16"})
    void aRunStoredInHalfPrecisionIsPrecisionNamingThatRounding(String model, String dtype, String id) throws Exception {
        Path half = storedIn(dtype, ref(model), tmp.resolve(id));
        var j = compare(0, ref(model).toString(), half.toString(), "--model", root.resolve("checkpoints/" + model).toString());
        assertThat(j.get("verdict").asText()).isEqualTo("precision");
        assertThat(j.get("failing_cells").asInt()).as(id + " noise is over every fp32 tolerance").isEqualTo(j.get("cells").asInt());
        int precision = 0;
        for (var c : j.get("attribution").get("cells")) {
            assertThat(c.get("status").asText()).as(c.toString()).isIn("exact", "precision");
            if (c.get("status").asText().equals("precision")) precision++;
        }
        assertThat(precision).isPositive();
        for (var e : j.get("attribution").get("precision_effects")) assertThat(e.get("explanation").asText()).startsWith(id + " activations");
        // the cache reads are this step's rounded k/v after the rows read before: exact, every step
        assertThat(cell(j, 3, "layers.0.attn.k_read").get("status").asText()).isEqualTo("exact");
        // without attribution the same run is a divergence at its first cell: the false alarm attribution removes
        var plain = compare(1, ref(model).toString(), half.toString(), "--model", root.resolve("checkpoints/" + model).toString(), "--no-attribution");
        assertThat(plain.get("verdict").asText()).isEqualTo("divergence");
    }

    @ParameterizedTest(name = "{0} {1}")
    @CsvSource({"llama-tiny, layers.1.attn.out", "llama-tiny, layers.2.mlp.out", "qwen3-tiny, layers.0.attn.q", "qwen3-tiny, layers.1.attn.v"})
    void aPlantedBugIsTheDivergenceAtItsCellAndItsOpIsUnexplained(String model, String point) throws Exception {
        Path bug = scaled(DumpSurgery.copy(ref(model), tmp.resolve("bug")), point, 1.05f);
        var j = compare(1, ref(model).toString(), bug.toString(), "--model", root.resolve("checkpoints/" + model).toString());
        var fd = j.get("first_divergence");
        assertThat(fd.get("point").asText()).isEqualTo(point);
        assertThat(fd.get("step").asInt()).isZero();
        assertThat(cell(j, 0, point).get("status").asText()).isEqualTo("unexplained");
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"llama-tiny", "qwen3-tiny"})
    void aPlantedBugUnderBf16NoiseIsStillTheDivergence(String model) throws Exception {
        Path bug = scaled(storedIn("bfloat16", ref(model), tmp.resolve("bf16-bug")), "layers.1.mlp.out", 1.05f);
        var j = compare(1, ref(model).toString(), bug.toString(), "--model", root.resolve("checkpoints/" + model).toString());
        assertThat(j.get("first_divergence").get("point").asText()).isEqualTo("layers.1.mlp.out");
        assertThat(cell(j, 0, "layers.1.mlp.out").get("status").asText()).isEqualTo("unexplained");
        // the cells before it are bf16 rounding, named
        assertThat(cell(j, 0, "layers.1.attn.out").get("status").asText()).isIn("exact", "precision");
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"llama-tiny", "qwen3-tiny"})
    void aReferenceWhoseOpTheModelDoesNotReproduceDisagrees(String model) throws Exception {
        Path bad = scaled(DumpSurgery.copy(ref(model), tmp.resolve("ref")), "layers.1.attn.out", 1.05f);
        var j = compare(4, bad.toString(), "--model", root.resolve("checkpoints/" + model).toString());
        assertThat(j.get("verdict").asText()).isEqualTo("reference_disagrees");
        var d = j.get("reference_disagreement");
        assertThat(d.get("point").asText()).isEqualTo("layers.1.attn.out");
        assertThat(d.get("reference_local").get("status").asText()).isEqualTo("unexplained");
    }
}
