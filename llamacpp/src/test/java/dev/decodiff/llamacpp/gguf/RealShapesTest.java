package dev.decodiff.llamacpp.gguf;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.engine.CheckpointFiles;
import dev.decodiff.engine.Gemma4Config;
import dev.decodiff.metal.DType;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/** The GGUF plans of the four released shapes (from their configs, no weights) and of the bundled checkpoints. */
class RealShapesTest {
    private static JsonNode json(Path p) {
        try {
            return new ObjectMapper().readTree(p.toFile());
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    private static Path resource(String name) {
        try {
            return Path.of(RealShapesTest.class.getResource("/real-shapes/" + name + ".json").toURI());
        } catch (java.net.URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    private static Map<String, List<Long>> shapes(GgufPlan plan) {
        var m = new LinkedHashMap<String, List<Long>>();
        for (var t : plan.tensorInfos()) {
            var ne = new ArrayList<Long>();
            for (long d : t.ne()) ne.add(d);
            m.put(t.name(), ne);
        }
        return m;
    }

    @ParameterizedTest
    @CsvSource({"e2b, model.language_model., 131072", "e4b, model., 131072", "26b-a4b, model., 262144", "31b, model.language_model., 262144"})
    void eachReleasedShapePlansTheTensorsAndHparamsLlamaCppsLoaderAsksFor(String shape, String prefix, long context) {
        Path file = resource(shape);
        var config = Gemma4Config.read(file);
        var hf = new ArrayList<>(LoaderExpectations.checkpointTensors(config, prefix));
        // the multimodal checkpoints also carry vision and audio towers, which a text GGUF leaves out
        hf.add(new Gemma4GgufPlan.HfTensor("model.vision_tower.encoder.layers.0.mlp.fc1.weight", DType.BF16, new long[]{4, 4}));
        hf.add(new Gemma4GgufPlan.HfTensor("model.embed_audio.embedding_projection.weight", DType.BF16, new long[]{4, 4}));
        var plan = Gemma4GgufPlan.of(shape, json(file), file, hf, null, GgufOutputType.BF16);

        assertThat(shapes(plan)).containsExactlyInAnyOrderEntriesOf(LoaderExpectations.llamaCppTensors(config));
        MetadataExpectations.assertMatches(plan.metadata(), config, context);
        assertThat(plan.metadata().get("tokenizer.ggml.model").asString()).as("no tokenizer: llama.cpp's dummy vocabulary").isEqualTo("none");
        assertThat(MetadataExpectations.u32(plan.metadata(), "gemma4.vocab_size")).isEqualTo(config.vocabSize());
        assertThat(MetadataExpectations.u32(plan.metadata(), "general.file_type")).as("MOSTLY_BF16").isEqualTo(32);
        for (var t : plan.tensorInfos()) {
            boolean matrix = t.ne().length >= 2 && !t.name().endsWith("_norm.weight") && !t.name().endsWith("ffn_gate_inp.weight");
            assertThat(t.type()).as(t.name()).isEqualTo(matrix ? GgmlType.BF16 : GgmlType.F32);
            assertThat(t.offset() % 32).as(t.name() + " offset").isZero();
        }
        assertThat(KvSharing.llamaCppMismatches(plan.metadata())).as("llama.cpp's KV-share pairing holds for the released shapes").isEmpty();
    }

    @ParameterizedTest
    @ValueSource(strings = {"gemma4-tiny", "gemma4-tiny-ple", "gemma4-tiny-moe"})
    void eachBundledCheckpointPlansExactlyTheTensorsLlamaCppsLoaderAsksFor(String checkpoint) {
        Path dir = Checkpoints.dir(checkpoint);
        var config = Gemma4Config.read(dir.resolve("config.json"));
        try (var files = CheckpointFiles.open(dir)) {
            var plan = HfToGguf.plan(dir, files, GgufOutputType.F16);
            assertThat(shapes(plan)).containsExactlyInAnyOrderEntriesOf(LoaderExpectations.llamaCppTensors(config));
            assertThat(LoaderExpectations.checkpointTensors(config, "model.")).extracting(Gemma4GgufPlan.HfTensor::name)
                    .as("the spec's tensor table describes the bundled files").containsExactlyInAnyOrderElementsOf(files.all().keySet());
        }
    }
}
