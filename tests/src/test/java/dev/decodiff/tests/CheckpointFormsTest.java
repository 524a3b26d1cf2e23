package dev.decodiff.tests;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.decodiff.engine.CheckpointException;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.metal.SafetensorsFile;
import dev.decodiff.metal.SafetensorsWriter;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The bundled checkpoint re-packed the way official multimodal checkpoints are (prefix model.language_model.,
 * text_config nested in config.json, the older global_head_dim form, two shards with an index, vision tensors
 * beside) must give transformers' logits; broken checkpoints must fail naming the file.
 */
class CheckpointFormsTest {
    @TempDir Path tmp;

    @Test
    void multimodalShardedOldFormCheckpointGivesTheReferenceLogits() throws Exception {
        Path src = ReferenceCases.repoRoot().resolve("checkpoints/gemma4-tiny");
        Path dst = tmp.resolve("mm");
        Files.createDirectories(dst);
        var json = new ObjectMapper();
        var text = (ObjectNode) json.readTree(src.resolve("config.json").toFile());
        text.remove("per_layer_config");
        text.put("global_head_dim", 64);
        text.put("num_global_key_value_heads", 1);
        var root = json.createObjectNode();
        root.put("model_type", "gemma4");
        root.set("text_config", text);
        json.writeValue(dst.resolve("config.json").toFile(), root);

        var names = new ArrayList<String>();
        var a = new SafetensorsWriter();
        var b = new SafetensorsWriter();
        var index = json.createObjectNode();
        var map = index.putObject("weight_map");
        try (var f = SafetensorsFile.open(src.resolve("model.safetensors"))) {
            int i = 0;
            for (var t : f.tensors().values()) {
                String name = t.name().replaceFirst("^model\\.", "model.language_model.");
                var shard = (i++ % 2 == 0) ? a : b;
                shard.add(name, t.shape(), t.toFloats());
                map.put(name, shard == a ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors");
                names.add(name);
            }
        }
        a.add("model.vision_tower.patch.weight", new long[]{2, 2}, new float[]{1, 2, 3, 4});
        map.put("model.vision_tower.patch.weight", "model-00001-of-00002.safetensors");
        a.write(dst.resolve("model-00001-of-00002.safetensors"), Map.of("format", "pt"));
        b.write(dst.resolve("model-00002-of-00002.safetensors"), Map.of("format", "pt"));
        json.writeValue(dst.resolve("model.safetensors.index.json").toFile(), index);

        Path ref = ReferenceCases.repoRoot().resolve("reference-dumps/gemma4-tiny/short");
        var m = json.readTree(ref.resolve("manifest.json").toFile());
        int[] tokens = new int[m.get("tokens").size()];
        for (int i = 0; i < tokens.length; i++) tokens[i] = m.get("tokens").get(i).asInt();
        try (var model = Gemma4Model.load(dst)) {
            assertThat(model.files().prefix()).isEqualTo("model.language_model.");
            var s = model.newSession();
            for (var st : m.get("steps")) {
                int start = st.get("start").asInt(), len = st.get("length").asInt();
                float[] logits = s.forward(Arrays.copyOfRange(tokens, start, start + len));
                float[] expected;
                try (var f = SafetensorsFile.open(ref.resolve(st.get("file").asText()))) {
                    expected = f.get("logits").toFloats();
                }
                assertThat(GoldenTokenTest.relL2(logits, expected)).isLessThan(GoldenTokenTest.LOGITS_TOLERANCE);
            }
        }
    }

    @Test
    void truncatedWeightsFailNamingTheFile() throws Exception {
        Path src = ReferenceCases.repoRoot().resolve("checkpoints/gemma4-tiny");
        Path dst = tmp.resolve("cut");
        Files.createDirectories(dst);
        Files.copy(src.resolve("config.json"), dst.resolve("config.json"));
        byte[] w = Files.readAllBytes(src.resolve("model.safetensors"));
        Files.write(dst.resolve("model.safetensors"), Arrays.copyOf(w, w.length / 2));
        assertThatThrownBy(() -> Gemma4Model.load(dst)).isInstanceOf(CheckpointException.class)
                .hasMessageContaining("model.safetensors").hasMessageContaining("truncated");
    }

    @Test
    void aMissingTensorIsNamed() throws Exception {
        Path src = ReferenceCases.repoRoot().resolve("checkpoints/gemma4-tiny");
        Path dst = tmp.resolve("missing");
        Files.createDirectories(dst);
        Files.copy(src.resolve("config.json"), dst.resolve("config.json"));
        var out = new SafetensorsWriter();
        try (var f = SafetensorsFile.open(src.resolve("model.safetensors"))) {
            for (var t : f.tensors().values())
                if (!t.name().equals("model.layers.3.mlp.up_proj.weight")) out.add(t.name(), t.shape(), t.toFloats());
        }
        out.write(dst.resolve("model.safetensors"), Map.of());
        assertThatThrownBy(() -> Gemma4Model.load(dst)).isInstanceOf(CheckpointException.class)
                .hasMessageContaining("layers.3.mlp.up_proj.weight");
    }
}
