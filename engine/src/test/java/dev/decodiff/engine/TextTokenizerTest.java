package dev.decodiff.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.zip.GZIPOutputStream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The tokenizer wrapper on a tiny tokenizer.json built like Gemma's (SentencePiece-style BPE with byte
 * fallback, "▁" for spaces, a {@code <bos>} post-processor). Every expected id and text below was
 * produced by Hugging Face {@code tokenizers} 0.23.2 ({@code Tokenizer.from_file}) on this same file.
 * Parity on the real Gemma tokenizer is tested in the tests module (TokenizerParityTest).
 */
class TextTokenizerTest {

    /** Gemma's normalizer, pre-tokenizer, post-processor and decoder with a 28-token vocabulary. */
    static final String TINY_TOKENIZER_JSON = """
            {"version": "1.0", "truncation": null, "padding": null,
             "added_tokens": [
              {"id": 0, "content": "<pad>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
              {"id": 1, "content": "<eos>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
              {"id": 2, "content": "<bos>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
              {"id": 3, "content": "<unk>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
              {"id": 4, "content": "<start_of_turn>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
              {"id": 5, "content": "<end_of_turn>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}],
             "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
             "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": false},
             "post_processor": {"type": "TemplateProcessing",
              "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
              "pair": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "<bos>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
              "special_tokens": {"<bos>": {"id": "<bos>", "ids": [2], "tokens": ["<bos>"]}}},
             "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                                                           {"type": "ByteFallback"}, {"type": "Fuse"}]},
             "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "continuing_subword_prefix": null,
              "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
              "vocab": {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "<start_of_turn>": 4, "<end_of_turn>": 5,
                        "<0xE2>": 6, "<0x82>": 7, "<0xAC>": 8, "<0xF0>": 9, "<0x9F>": 10, "<0x99>": 11,
                        "▁": 12, "h": 13, "i": 14, "▁h": 15, "▁hi": 16, "a": 17, "▁a": 18, "\\n": 19,
                        "u": 20, "s": 21, "e": 22, "r": 23, "us": 24, "er": 25, "user": 26, "use": 27},
              "merges": [["▁", "h"], ["▁h", "i"], ["▁", "a"], ["u", "s"], ["e", "r"], ["us", "e"], ["use", "r"]]}}
            """;

    @TempDir
    static Path dir;

    static TextTokenizer tok;

    @BeforeAll
    static void load() throws IOException {
        Files.writeString(dir.resolve("tokenizer.json"), TINY_TOKENIZER_JSON);
        tok = TextTokenizer.load(dir);
    }

    @AfterAll
    static void close() {
        tok.close();
    }

    @Test
    void encodesWithoutAddingSpecialTokens() {
        assertThat(tok.encode("hi")).containsExactly(13, 14);
        assertThat(tok.encode(" hi")).containsExactly(16);
        assertThat(tok.encode("hi a")).containsExactly(13, 14, 18);
        assertThat(tok.encode("use")).containsExactly(27);
        assertThat(tok.encode("x")).containsExactly(3);
        assertThat(tok.encode("")).isEmpty();
    }

    @Test
    void encodeWithSpecialAppliesThePostProcessor() {
        assertThat(tok.encodeWithSpecial("hi")).containsExactly(2, 13, 14);
        assertThat(tok.encodeWithSpecial("€")).containsExactly(2, 6, 7, 8);
    }

    @Test
    void recognisesSpecialTokensWrittenInTheText() {
        assertThat(tok.encode("<start_of_turn>user\nhi<end_of_turn>")).containsExactly(4, 24, 25, 19, 13, 14, 5);
        assertThat(tok.encode("<bos>hi")).containsExactly(2, 13, 14);
    }

    @Test
    void spellsUnknownCharactersAsBytes() {
        assertThat(tok.encode("€")).containsExactly(6, 7, 8);
        assertThat(tok.encode("🙂")).containsExactly(9, 10, 11, 7);
        assertThat(tok.isByteFallback(6)).isTrue();
        assertThat(tok.isByteFallback(17)).isFalse();
    }

    @Test
    void decodesFaithfullyWithSpecialTokens() {
        assertThat(tok.decode(new int[] {4, 24, 25, 19, 13, 14, 5})).isEqualTo("<start_of_turn>user\nhi<end_of_turn>");
        assertThat(tok.decode(new int[] {17, 6, 7, 8, 18})).isEqualTo("a€ a");
        assertThat(tok.decode(new int[] {6, 17})).isEqualTo("\uFFFDa");          // an incomplete byte run
        assertThat(tok.decode(new int[] {9, 10, 11})).isEqualTo("\uFFFD\uFFFD\uFFFD"); // one U+FFFD per byte token
        assertThat(tok.decode(new int[0])).isEmpty();
        assertThat(tok.decodeToken(16)).isEqualTo(" hi");
        assertThat(tok.decodeToken(6)).isEqualTo("\uFFFD");
        assertThat(tok.decodeToken(2)).isEqualTo("<bos>");
    }

    @Test
    void namesSpecialTokens() {
        assertThat(tok.bosId()).isEqualTo(2);
        assertThat(tok.eosId()).isEqualTo(1);
        assertThat(tok.stopIds()).containsExactly(1, 5);
        assertThat(tok.tokenId("<end_of_turn>")).hasValue(5);
        assertThat(tok.tokenId("▁hi")).hasValue(16);
        assertThat(tok.tokenId("<|turn>")).isEmpty();
        assertThat(tok.isSpecial(4)).isTrue();
        assertThat(tok.isSpecial(16)).isFalse();
        assertThat(tok.piece(6)).isEqualTo("<0xE2>");
        assertThat(tok.vocabSize()).isEqualTo(28);
    }

    @Test
    void streamingHoldsBackOpenByteRuns() {
        StreamingDecoder s = tok.streamingDecoder();
        assertThat(s.push(17)).isEqualTo("a");
        assertThat(s.push(6)).isEmpty();
        assertThat(s.push(7)).isEmpty();
        assertThat(s.push(8)).isEmpty(); // "€" is complete, but the next token could still extend the byte run
        assertThat(s.hasPending()).isTrue();
        assertThat(s.push(18)).isEqualTo("€ a");
        assertThat(s.flush()).isEmpty();
    }

    @Test
    void streamingFlushesAnIncompleteCharacterAsHuggingFaceDecodesIt() {
        StreamingDecoder s = tok.streamingDecoder();
        for (int id : new int[] {9, 10, 11, 7}) assertThat(s.push(id)).isEmpty();
        assertThat(s.flush()).isEqualTo("🙂");
        StreamingDecoder broken = tok.streamingDecoder();
        assertThat(broken.push(6)).isEmpty();
        assertThat(broken.push(17)).isEqualTo("\uFFFDa");
    }

    @Test
    void streamedTextEqualsTheWholeDecode() {
        int[] ids = tok.encode("<start_of_turn>user\nhi a€ hi🙂a<end_of_turn>");
        StreamingDecoder s = tok.streamingDecoder();
        StringBuilder out = new StringBuilder();
        for (int id : ids) out.append(s.push(id));
        out.append(s.flush());
        assertThat(out.toString()).isEqualTo(tok.decode(ids)).isEqualTo("<start_of_turn>user\nhi a€ hi🙂a<end_of_turn>");
    }

    @Test
    void readsGzippedTokenizerAndConfigTokens(@TempDir Path other) throws IOException {
        try (OutputStream out = new GZIPOutputStream(Files.newOutputStream(other.resolve("tokenizer.json.gz")))) {
            out.write(TINY_TOKENIZER_JSON.getBytes(StandardCharsets.UTF_8));
        }
        Files.writeString(other.resolve("tokenizer_config.json"),
                "{\"bos_token\": \"<bos>\", \"eos_token\": {\"content\": \"<end_of_turn>\"}}");
        try (TextTokenizer gz = TextTokenizer.load(other)) {
            assertThat(gz.encode(" hi")).containsExactly(16);
            assertThat(gz.eosId()).isEqualTo(1);
            assertThat(gz.stopIds()).containsExactly(1, 5);
        }
    }

    @Test
    void missingTokenizerIsACheckpointErrorNamingTheFile(@TempDir Path empty) {
        assertThatThrownBy(() -> TextTokenizer.load(empty))
                .isInstanceOf(CheckpointException.class)
                .hasMessageContaining(empty.resolve("tokenizer.json").toString());
        assertThatThrownBy(() -> TextTokenizer.load(empty.resolve("nope.json")))
                .isInstanceOf(CheckpointException.class)
                .hasMessageContaining("nope.json");
    }

    @Test
    void brokenTokenizerIsACheckpointErrorNamingTheFile(@TempDir Path bad) throws IOException {
        Path file = bad.resolve("tokenizer.json");
        Files.writeString(file, "{\"added_tokens\": [");
        assertThatThrownBy(() -> TextTokenizer.load(bad))
                .isInstanceOf(CheckpointException.class)
                .hasMessageContaining(file.toString());
        Files.writeString(file, "{\"version\": \"1.0\", \"model\": {\"type\": \"NoSuchModel\", \"vocab\": {}}}");
        assertThatThrownBy(() -> TextTokenizer.load(bad))
                .isInstanceOf(CheckpointException.class)
                .hasMessageContaining(file.toString());
    }

    @Test
    void keepsDjlOfflineUnlessTheUserSaysOtherwise() {
        if (System.getenv("DJL_OFFLINE") == null) assertThat(System.getProperty("ai.djl.offline")).isEqualTo("true");
        if (System.getenv("OPT_OUT_TRACKING") == null) assertThat(System.getProperty("OPT_OUT_TRACKING")).isEqualTo("true");
        if (System.getenv("RUST_FLAVOR") == null) assertThat(System.getProperty("RUST_FLAVOR")).isEqualTo("cpu");
    }
}
