package dev.decodiff.metal;

import com.fasterxml.jackson.core.JsonProcessingException;

import java.io.IOException;
import java.util.Locale;
import java.util.regex.Pattern;

/**
 * What is wrong with a JSON text, in plain words: the parser's own message names its internals (a limit of
 * StreamReadConstraints, a feature such as ALLOW_NON_NUMERIC_NUMBERS to enable, a source excerpt), none of which a
 * user can act on. Every reader of a JSON file (manifest, safetensors header, config.json, tolerance profile) says it
 * through here.
 */
public final class JsonErrors {
    private JsonErrors() {}

    private static final Pattern FEATURE_HINT = Pattern.compile(
            "\\s*\\(not recognized as one since Feature '[A-Z_]+' not enabled for parser\\)"
                    + "|:?\\s*(?:enable|use)\\s+`[^`]*`(?:\\s+to allow)?(?:\\s+and[^)]*)?"
                    + "|\\s*\\((?:start marker at )?\\[Source:[^\\]]*\\][^)]*\\)|\\s*\\[Source:[^\\]]*\\]"
                    + "|\\s*\\([^()]*`[^`]*(?:Feature|Constraints)[^`]*`[^()]*\\)");

    /** Plain words for a JSON problem, with its line and column; for another I/O failure, its message. */
    public static String plain(IOException e) {
        if (!(e instanceof JsonProcessingException j)) return e.getMessage();
        String m = j.getOriginalMessage() == null ? "" : j.getOriginalMessage();
        String what;
        if (m.contains("StreamReadConstraints") || m.contains("exceeds the maximum")) what = limit(m);
        else if (m.contains("ALLOW_NON_NUMERIC_NUMBERS") || m.matches("(?s).*Non-standard token '[-+]?(NaN|Infinity|INF)'.*"))
            what = "NaN and Infinity are not JSON numbers (write a finite number)";
        else what = FEATURE_HINT.matcher(m).replaceAll("").strip();
        var at = j.getLocation();
        if (at != null && at.getLineNr() > 0) what += String.format(Locale.ROOT, " at line %d, column %d", at.getLineNr(), at.getColumnNr());
        return what;
    }

    private static String limit(String m) {
        String l = m.toLowerCase(Locale.ROOT);
        if (l.contains("number")) return "a number has more digits than a reader accepts (at most 1000)";
        if (l.contains("nesting depth")) return "arrays or objects nest deeper than a reader accepts (at most 1000 levels)";
        if (l.contains("name length")) return "a key is longer than a reader accepts";
        if (l.contains("string")) return "a string is longer than a reader accepts";
        if (l.contains("document")) return "the text is longer than a reader accepts";
        return "a value is larger than a reader accepts";
    }
}
