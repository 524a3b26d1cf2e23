package dev.decodiff.tests;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.engine.ChatTemplate;
import dev.decodiff.engine.ChatTemplate.Turn;
import dev.decodiff.engine.StreamingDecoder;
import dev.decodiff.engine.TextTokenizer;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * The engine's tokenizer gives exactly the ids that Hugging Face {@code tokenizers} gives, on the real
 * Gemma 3 tokenizer and on every bundled checkpoint's tokenizer.
 *
 * <p>Expected data (made by Hugging Face {@code tokenizers}, never by us):
 * <ul>
 *   <li>{@code src/test/resources/gemma3-tokenizer/}: {@code tokenizer.json[.gz]}, {@code hard-strings.json},
 *   {@code expected-ids.json} = [{"text", "ids" (add_special_tokens=False), "ids_with_special" (True),
 *   optional "decoded" (decode(ids, skip_special_tokens=False) where it differs from text)}];
 *   <li>{@code src/test/resources/<checkpoint>-tokenizer-expected.json} for each {@code checkpoints/<checkpoint>/}
 *   that has a {@code config.json} and a tokenizer, in the same form (a list, or an object holding the list
 *   under "cases"); and each such file needs its checkpoint folder.
 * </ul>
 * Missing expected data is a failure, not a skip: parity nobody checks is parity nobody has.
 */
class TokenizerParityTest {

    static final ObjectMapper JSON = new ObjectMapper();
    static final int MIN_STRINGS = 30;

    static Path gemma3Dir;
    static TextTokenizer gemma3;

    @BeforeAll
    static void loadGemma3() {
        gemma3Dir = resourceDir("gemma3-tokenizer");
        gemma3 = TextTokenizer.load(gemma3Dir);
    }

    @AfterAll
    static void close() {
        if (gemma3 != null) gemma3.close();
    }

    @Test
    void expectedDataCoversEnoughHardStrings() throws IOException {
        List<Case> cases = readCases(gemma3Dir.resolve("expected-ids.json"));
        assertThat(cases).as("cases in expected-ids.json").hasSizeGreaterThanOrEqualTo(MIN_STRINGS);
        Path hard = gemma3Dir.resolve("hard-strings.json");
        assertThat(hard).as("hard-strings.json beside expected-ids.json").exists();
        Set<String> hardTexts = new LinkedHashSet<>();
        for (JsonNode n : JSON.readTree(hard.toFile())) hardTexts.add(n.isTextual() ? n.asText() : n.get("text").asText());
        assertThat(cases.stream().map(Case::text).toList())
                .as("expected-ids.json covers hard-strings.json").containsExactlyInAnyOrderElementsOf(hardTexts);
    }

    @TestFactory
    Stream<DynamicTest> gemma3IdsEqualHuggingFace() throws IOException {
        return parityTests("gemma3", gemma3, readCases(gemma3Dir.resolve("expected-ids.json")));
    }

    @Test
    void gemma3SpecialTokensAndChatPrompt() throws IOException {
        assertThat(gemma3.bosId()).isEqualTo(2);
        assertThat(gemma3.eosId()).isEqualTo(1);
        assertThat(gemma3.tokenId("<start_of_turn>")).hasValue(105);
        assertThat(gemma3.tokenId("<end_of_turn>")).hasValue(106);
        assertThat(gemma3.isStop(106)).isTrue();
        ChatTemplate template = ChatTemplate.forTokenizer(gemma3);
        assertThat(template.format()).isEqualTo(ChatTemplate.Format.GEMMA3);

        // The chat prompt's ids are <bos> followed by Hugging Face's ids of the template text after <bos>.
        String body = "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n";
        Case expected = readCases(gemma3Dir.resolve("expected-ids.json")).stream()
                .filter(c -> c.text().equals(body)).findFirst()
                .orElseThrow(() -> new AssertionError("expected-ids.json lacks the chat prompt string " + JSON.valueToTree(body)));
        int[] want = new int[expected.ids().length + 1];
        want[0] = 2;
        System.arraycopy(expected.ids(), 0, want, 1, expected.ids().length);
        assertThat(template.encode(gemma3, List.of(Turn.user("hi")))).containsExactly(want);
    }

    @TestFactory
    Stream<DynamicTest> everyCheckpointTokenizerEqualsHuggingFace() throws IOException {
        Path repo = repoRoot();
        Path resources = repo.resolve("tests/src/test/resources");
        Set<String> names = new LinkedHashSet<>();
        Path checkpoints = repo.resolve("checkpoints");
        if (Files.isDirectory(checkpoints)) {
            try (Stream<Path> dirs = Files.list(checkpoints)) {
                // a checkpoint is a model (config.json) with a tokenizer; checkpoints/tokenizer/ alone is not one
                dirs.filter(d -> Files.exists(d.resolve("config.json")))
                        .filter(d -> Files.exists(d.resolve("tokenizer.json")) || Files.exists(d.resolve("tokenizer.json.gz")))
                        .map(d -> d.getFileName().toString()).sorted().forEach(names::add);
            }
        }
        try (Stream<Path> files = Files.list(resources)) {
            files.map(f -> f.getFileName().toString()).filter(f -> f.endsWith("-tokenizer-expected.json"))
                    .map(f -> f.substring(0, f.length() - "-tokenizer-expected.json".length())).sorted().forEach(names::add);
        }
        List<DynamicTest> tests = new ArrayList<>();
        for (String name : names) {
            Path expected = resources.resolve(name + "-tokenizer-expected.json");
            Path dir = checkpoints.resolve(name);
            tests.add(DynamicTest.dynamicTest(name, () -> {
                if (!Files.exists(expected)) fail("checkpoints/" + name + " has a tokenizer but " + expected + " is missing");
                if (!Files.isDirectory(dir)) fail(expected + " exists but checkpoint folder " + dir + " is missing");
                List<Case> cases = readCases(expected);
                assertThat(cases).as(expected.toString()).hasSizeGreaterThanOrEqualTo(MIN_STRINGS);
                try (TextTokenizer tok = TextTokenizer.load(dir)) {
                    List<String> problems = new ArrayList<>();
                    for (Case c : cases) problems.addAll(mismatches(tok, c));
                    assertThat(problems).as(name + ": " + cases.size() + " strings").isEmpty();
                }
            }));
        }
        return tests.stream();
    }

    // ---------------------------------------------------------------------------------------------

    record Case(String text, int[] ids, int[] idsWithSpecial, String decoded) {}

    static Stream<DynamicTest> parityTests(String name, TextTokenizer tok, List<Case> cases) {
        assertThat(cases).as(name + " expected cases").hasSizeGreaterThanOrEqualTo(MIN_STRINGS);
        List<DynamicTest> tests = new ArrayList<>();
        for (int i = 0; i < cases.size(); i++) {
            Case c = cases.get(i);
            tests.add(DynamicTest.dynamicTest(String.format("%s #%02d %s", name, i, abbreviate(c.text())), () -> {
                List<String> problems = mismatches(tok, c);
                assertThat(problems).isEmpty();
            }));
        }
        return tests.stream();
    }

    /** Everything where the engine's tokenizer differs from Hugging Face on one string. */
    static List<String> mismatches(TextTokenizer tok, Case c) {
        List<String> problems = new ArrayList<>();
        String label = String.valueOf(JSON.valueToTree(c.text()));
        int[] ids = tok.encode(c.text());
        if (!Arrays.equals(ids, c.ids())) {
            problems.add(label + ": encode " + Arrays.toString(ids) + " != HF " + Arrays.toString(c.ids()));
        }
        if (c.idsWithSpecial() != null) {
            int[] withSpecial = tok.encodeWithSpecial(c.text());
            if (!Arrays.equals(withSpecial, c.idsWithSpecial())) {
                problems.add(label + ": encodeWithSpecial " + Arrays.toString(withSpecial) + " != HF "
                        + Arrays.toString(c.idsWithSpecial()));
            }
        }
        String decoded = tok.decode(c.ids());
        String wantDecoded = c.decoded() != null ? c.decoded() : c.text();
        if (!decoded.equals(wantDecoded)) {
            problems.add(label + ": decode gives " + JSON.valueToTree(decoded) + ", want " + JSON.valueToTree(wantDecoded));
        }
        StreamingDecoder stream = tok.streamingDecoder();
        StringBuilder streamed = new StringBuilder();
        for (int id : c.ids()) streamed.append(stream.push(id));
        streamed.append(stream.flush());
        if (!streamed.toString().equals(decoded)) {
            problems.add(label + ": streamed text " + JSON.valueToTree(streamed.toString()) + " != decode " + JSON.valueToTree(decoded));
        }
        return problems;
    }

    static List<Case> readCases(Path file) throws IOException {
        if (!Files.exists(file)) fail("expected tokenizer data is missing: " + file);
        JsonNode root = JSON.readTree(file.toFile());
        JsonNode list = root.isArray() ? root : root.get("cases");
        if (list == null || !list.isArray()) fail(file + " is neither a list of cases nor an object with \"cases\"");
        List<Case> cases = new ArrayList<>();
        for (JsonNode n : list) {
            if (!n.hasNonNull("text") || !n.hasNonNull("ids")) fail(file + ": a case without text/ids: " + n);
            cases.add(new Case(n.get("text").asText(), JSON.convertValue(n.get("ids"), int[].class),
                    n.hasNonNull("ids_with_special") ? JSON.convertValue(n.get("ids_with_special"), int[].class) : null,
                    n.hasNonNull("decoded") ? n.get("decoded").asText() : null));
        }
        return cases;
    }

    /** A folder of tests/src/test/resources, read in place (a stale copy in target/ must not pass for it). */
    static Path resourceDir(String name) {
        Path dir = repoRoot().resolve("tests/src/test/resources").resolve(name);
        if (!Files.isDirectory(dir)) fail("expected tokenizer data is missing: folder " + dir);
        return dir;
    }

    /** The repository root: surefire runs in the tests module, whose parent holds checkpoints/. */
    static Path repoRoot() {
        Path base = Path.of(System.getProperty("basedir", System.getProperty("user.dir"))).toAbsolutePath();
        for (Path p = base; p != null; p = p.getParent()) {
            if (Files.isDirectory(p.resolve("tests")) && Files.isDirectory(p.resolve("engine"))) return p;
        }
        throw new AssertionError("cannot find the repository root above " + base);
    }

    static String abbreviate(String s) {
        String json = String.valueOf(JSON.valueToTree(s));
        return json.length() <= 50 ? json : json.substring(0, 47) + "...";
    }
}
