package dev.decodiff.engine.arch;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.engine.CheckpointException;
import dev.decodiff.engine.llama.LlamaArchitecture;
import dev.decodiff.engine.qwen35.Qwen35Architecture;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

/**
 * The registry of architectures, chosen by config.json's model_type. A multimodal wrapper (gemma4, qwen3_5,
 * qwen3_5_moe) is read through its text_config; its towers are never loaded.
 */
public final class Architectures {
    private Architectures() {}

    /** Every architecture decodiff runs, in the order the docs list them. */
    public static final List<Architecture> ALL = List.of(Gemma4Architecture.INSTANCE, Qwen35Architecture.INSTANCE, LlamaArchitecture.INSTANCE);

    /** Multimodal wrapper model types and the text model type their text_config defaults to. */
    private static final Map<String, String> WRAPPERS = Map.of(
            "gemma4", "gemma4_text", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text");

    /** The architecture of the checkpoint folder (its config.json). */
    public static Architecture of(Path dir) {
        Path file = dir.resolve("config.json");
        if (!Files.isRegularFile(file)) throw new CheckpointException(dir + ": no config.json; pass a Hugging Face checkpoint folder (config.json + *.safetensors)");
        JsonNode root;
        try {
            root = new ObjectMapper().readTree(Files.readString(file));
        } catch (IOException e) {
            throw new CheckpointException(file + ": cannot read config.json: " + dev.decodiff.metal.JsonErrors.plain(e), e);
        }
        return forModelType(textModelType(root, file.toString()), file.toString());
    }

    /** The text model type of a config: its own model_type, or its text_config's for a multimodal wrapper. */
    public static String textModelType(JsonNode root, String file) {
        if (root == null || !root.isObject()) throw new CheckpointException(file + ": config.json is not a JSON object");
        String type = root.path("model_type").asText("");
        if (WRAPPERS.containsKey(type)) {
            JsonNode text = root.get("text_config");
            if (text == null || !text.isObject())
                throw new CheckpointException(file + ": model_type '" + type + "' has no text_config object; add the text model's config as text_config");
            return text.path("model_type").asText(WRAPPERS.get(type));
        }
        if (type.isEmpty()) throw new CheckpointException(file + ": no model_type; add the model_type transformers wrote (e.g. \"qwen3_5_text\")");
        return type;
    }

    public static Architecture forModelType(String textType, String file) {
        for (var a : ALL) if (a.modelTypes().contains(textType)) return a;
        throw new CheckpointException(file + ": model_type '" + textType + "' is not supported; decodiff runs "
                + String.join(", ", supportedTypes()) + " (or a multimodal wrapper whose text_config is one of them)");
    }

    public static List<String> supportedTypes() {
        return ALL.stream().flatMap(a -> a.modelTypes().stream()).toList();
    }

    /** Loads the checkpoint with its architecture. */
    public static LoadedModel load(Path dir) { return of(dir).load(dir); }
}
