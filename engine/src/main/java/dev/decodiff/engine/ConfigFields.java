package dev.decodiff.engine;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Typed access to the fields of one config.json object (the file's root, or a text_config inside it), with defaults.
 * Every refusal is one line that names the file, the field (with its path inside the file) and the fix.
 */
public record ConfigFields(JsonNode c, String file, String path) {

    /** The file's JSON root; duplicate keys are refused (a config that says a thing twice says nothing certain). */
    public static JsonNode readRoot(Path file) {
        try {
            return new ObjectMapper().enable(com.fasterxml.jackson.core.JsonParser.Feature.STRICT_DUPLICATE_DETECTION)
                    .readTree(Files.readString(file));
        } catch (IOException e) {
            throw new CheckpointException(file + (e instanceof com.fasterxml.jackson.core.JsonProcessingException ? ": is not valid JSON: " : ": cannot read config.json: ")
                    + dev.decodiff.metal.JsonErrors.plain(e), e);
        }
    }

    public CheckpointException bad(String field, String why) {
        return new CheckpointException(file + ": " + path + field + " " + why);
    }

    public String str(String f, String def) {
        JsonNode n = c.get(f);
        return n == null || n.isNull() ? def : n.asText();
    }

    public boolean bool(String f, boolean def) {
        JsonNode n = c.get(f);
        if (n == null || n.isNull()) return def;
        if (!n.isBoolean()) throw bad(f, "is " + n + "; write true or false");
        return n.asBoolean();
    }

    public double num(String f, double def) {
        JsonNode n = c.get(f);
        if (n == null || n.isNull()) return def;
        if (!n.isNumber()) throw bad(f, "is " + n + "; write a number");
        return n.asDouble();
    }

    public Integer optInt(String f) {
        JsonNode n = c.get(f);
        if (n == null || n.isNull()) return null;
        if (!n.canConvertToInt() || !n.isIntegralNumber() || n.asInt() <= 0) throw bad(f, "is " + n + "; write a positive integer");
        return n.asInt();
    }

    public int positive(String f, int def) {
        Integer v = optInt(f);
        return v == null ? def : v;
    }
}
