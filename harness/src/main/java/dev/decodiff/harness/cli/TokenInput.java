package dev.decodiff.harness.cli;

import dev.decodiff.engine.ChatTemplate;
import dev.decodiff.engine.TextTokenizer;
import dev.decodiff.harness.BadInputException;
import picocli.CommandLine.Option;

import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;

/** --prompt TEXT | --tokens 2,651,… (exactly one), shared by run and dump. */
final class TokenInput {
    @Option(names = "--prompt", paramLabel = "TEXT", description = "Prompt text, encoded with the checkpoint's tokenizer.json (with <bos>).")
    String prompt;

    @Option(names = "--tokens", paramLabel = "IDS", split = ",", description = "Prompt token ids, comma-separated: 2,651,9023")
    int[] tokens;

    /** The prompt ids; the tokenizer is loaded only for --prompt. */
    int[] resolve(Path modelDir, boolean chat) {
        if (tokens != null) {
            if (chat) throw new BadInputException("--chat needs --prompt TEXT (it wraps text in the chat template), not --tokens");
            if (tokens.length == 0) throw new BadInputException("--tokens is empty; give at least one token id");
            for (int t : tokens) if (t < 0) throw new BadInputException("--tokens has a negative id: " + t);
            return tokens;
        }
        if (prompt == null) throw new BadInputException("give the prompt: --prompt TEXT or --tokens 2,651,…");
        try (var tok = TextTokenizer.load(modelDir)) {
            int[] ids = chat ? ChatTemplate.forTokenizer(tok).encode(tok, List.of(ChatTemplate.Turn.user(prompt))) : tok.encodeWithSpecial(prompt);
            // Gemma reads position 0 as <bos>; tokenizers without a post-processor (like the bundled ones) do not add it.
            int bos = bosOrNone(tok);
            if (bos >= 0 && (ids.length == 0 || ids[0] != bos)) {
                int[] withBos = new int[ids.length + 1];
                withBos[0] = bos;
                System.arraycopy(ids, 0, withBos, 1, ids.length);
                ids = withBos;
            }
            return ids;
        }
    }

    private static int bosOrNone(TextTokenizer tok) {
        try {
            return tok.bosId();
        } catch (IllegalStateException noBos) {
            return -1;
        }
    }

    static String ids(int[] ids) {
        return String.join(",", Arrays.stream(ids).mapToObj(Integer::toString).toList());
    }
}
