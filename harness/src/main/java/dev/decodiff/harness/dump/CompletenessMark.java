package dev.decodiff.harness.dump;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonToken;

import java.io.IOException;

/**
 * Adds the completeness mark to the text of a manifest.json, changing nothing else: every other byte stays as the
 * producer wrote it (field order, spacing, numbers as written, unknown fields). A top-level {@code "complete": false}
 * becomes {@code true} in place; an absent one is added as the last field, where a producer writes it (§4.1).
 */
public final class CompletenessMark {
    private CompletenessMark() {}

    /** The manifest text with the mark; the text must already be a valid manifest (DumpReader.parseManifest). */
    public static String add(String manifest) {
        try (var p = new JsonFactory().createParser(manifest)) {
            if (p.nextToken() != JsonToken.START_OBJECT) throw new IllegalArgumentException("manifest is not a JSON object");
            int lastValueEnd = -1;
            for (JsonToken t = p.nextToken(); t != JsonToken.END_OBJECT; t = p.nextToken()) {
                String name = p.currentName();
                JsonToken v = p.nextToken();
                p.finishToken(); // a string is read lazily: its end is known only once read
                int at = (int) p.currentTokenLocation().getCharOffset();
                if ("complete".equals(name)) {
                    if (v == JsonToken.VALUE_TRUE) return manifest;
                    if (v != JsonToken.VALUE_FALSE) throw new IllegalArgumentException("\"complete\" is neither true nor false");
                    return manifest.substring(0, at) + "true" + manifest.substring(at + "false".length());
                }
                p.skipChildren();
                lastValueEnd = (int) p.currentLocation().getCharOffset();
            }
            if (lastValueEnd < 0) throw new IllegalArgumentException("manifest is an empty object");
            String indent = indentOfFields(manifest);
            return manifest.substring(0, lastValueEnd) + "," + indent + "\"complete\": true" + manifest.substring(lastValueEnd);
        } catch (IOException e) {
            throw new IllegalArgumentException("manifest is not valid JSON: " + e.getMessage(), e);
        }
    }

    /** The line break and indent before the manifest's first field ("\n  " for a pretty-printed one, " " for one line). */
    private static String indentOfFields(String manifest) {
        int open = manifest.indexOf('{'), quote = manifest.indexOf('"', open);
        String between = manifest.substring(open + 1, Math.max(open + 1, quote));
        return between.isBlank() && !between.isEmpty() ? between : " ";
    }
}
