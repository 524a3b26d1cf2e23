package dev.decodiff.harness;

import java.util.Locale;

/**
 * Text from input — tensor names, manifest strings, file names, GGUF metadata — made safe for a terminal. A damaged or
 * hostile file can put any character into a name, and printed raw an ESC sequence recolours or rewrites the screen,
 * a BEL rings, U+202E reverses what follows, a NUL cuts a line short. Every such character is shown as an escape
 * ({@code \u001b}), the way the JSON output writes it; a name longer than {@link #MAX_WORD} characters is cut with a
 * visible marker, so one 10,000-character name cannot bury the report. Every command's plain-text output and every
 * error line goes through here.
 */
public final class Printable {
    /** The longest run of non-blank characters shown whole: far above any real point name or path. */
    public static final int MAX_WORD = 200;

    private Printable() {}

    /** One line of output: control and format characters escaped (a line break too), overlong names cut. */
    public static String line(String s) {
        if (s == null) return "";
        var out = new StringBuilder(s.length());
        int word = 0, cut = 0;
        for (int i = 0; i < s.length(); ) {
            int c = s.codePointAt(i);
            i += Character.charCount(c);
            boolean blank = c == ' ';
            if (blank) {
                cut = flushCut(out, cut);
                word = 0;
            } else if (++word > MAX_WORD) {
                cut++;
                continue;
            }
            if (needsEscape(c)) out.append(escape(c));
            else out.appendCodePoint(c);
        }
        flushCut(out, cut);
        return out.toString();
    }

    /** Several lines: each one through {@link #line}, the line breaks kept. */
    public static String lines(String s) {
        if (s == null) return "";
        var out = new StringBuilder(s.length());
        int from = 0;
        while (true) {
            int nl = s.indexOf('\n', from);
            out.append(line(s.substring(from, nl < 0 ? s.length() : nl)));
            if (nl < 0) break;
            out.append('\n');
            from = nl + 1;
        }
        return out.toString();
    }

    /** Whether printing this code point raw could steer the terminal: C0/C1 controls (a tab too), DEL, bidi and other format characters, line separators. */
    public static boolean needsEscape(int c) {
        int type = Character.getType(c);
        return Character.isISOControl(c) || type == Character.FORMAT || type == Character.LINE_SEPARATOR
                || type == Character.PARAGRAPH_SEPARATOR || type == Character.SURROGATE;
    }

    private static String escape(int c) {
        return c <= 0xffff ? String.format(Locale.ROOT, "\\u%04x", c) : String.format(Locale.ROOT, "\\U%08x", c);
    }

    private static int flushCut(StringBuilder out, int cut) {
        if (cut > 0) out.append("…[").append(String.format(Locale.ROOT, "%,d", cut)).append(" more characters]");
        return 0;
    }

    /**
     * The same rule for JSON output: Jackson escapes only the C0 controls, and leaves DEL, the C1 controls and the
     * bidi and other format characters raw; with these escapes a report's --json text is as safe on a terminal as its
     * plain text, and still the same JSON.
     */
    public static com.fasterxml.jackson.databind.ObjectMapper json(com.fasterxml.jackson.databind.ObjectMapper mapper) {
        mapper.getFactory().setCharacterEscapes(JsonEscapes.INSTANCE);
        return mapper;
    }

    private static final class JsonEscapes extends com.fasterxml.jackson.core.io.CharacterEscapes {
        static final JsonEscapes INSTANCE = new JsonEscapes();
        private final int[] ascii = standardAsciiEscapesForJSON();

        private JsonEscapes() { ascii[0x7f] = ESCAPE_STANDARD; }

        @Override
        public int[] getEscapeCodesForAscii() { return ascii; }

        @Override
        public com.fasterxml.jackson.core.SerializableString getEscapeSequence(int ch) {
            return needsEscape(ch) ? new com.fasterxml.jackson.core.io.SerializedString(String.format(Locale.ROOT, "\\u%04x", ch)) : null;
        }
    }
}
