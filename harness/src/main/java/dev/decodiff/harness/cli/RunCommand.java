package dev.decodiff.harness.cli;

import dev.decodiff.engine.Sampler;
import dev.decodiff.engine.TextTokenizer;
import dev.decodiff.harness.BadInputException;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.concurrent.Callable;

@Command(name = "run", mixinStandardHelpOptions = true,
        description = {"Runs the engine on a prompt and prints the continuation (greedy unless --temperature > 0).",
                "Text output stops at the tokenizer's stop tokens; with --ids exactly N ids are printed, comma-separated, on one line."},
        footer = {"", "Examples:",
                "  decodiff run --model checkpoints/gemma4-tiny --prompt 'Cotton denim is' -n 32",
                "  decodiff run --model checkpoints/gemma4-tiny --tokens 2,651,9023 -n 16 --ids"})
final class RunCommand implements Callable<Integer> {
    @Option(names = "--model", required = true, paramLabel = "DIR", description = "Checkpoint folder (config.json, *.safetensors, tokenizer.json), or a Gemma 4 .gguf file (its weights dequantized as ggml does; token ids only: --tokens, --ids).")
    Path model;

    @Mixin
    TokenInput input = new TokenInput();

    @Option(names = {"-n", "--max-new-tokens"}, paramLabel = "N", defaultValue = "32", description = "Tokens to generate (default ${DEFAULT-VALUE}).")
    int n;

    @Option(names = "--chat", description = "Wrap --prompt in the checkpoint's chat template as one user turn.")
    boolean chat;

    @Option(names = "--temperature", paramLabel = "T", defaultValue = "0", description = "Sampling temperature; 0 = greedy (default).")
    float temperature;

    @Option(names = "--top-k", paramLabel = "K", defaultValue = "0", description = "Keep the K most likely tokens (0 = all).")
    int topK;

    @Option(names = "--top-p", paramLabel = "P", defaultValue = "1", description = "Nucleus sampling threshold in (0, 1] (default 1).")
    float topP;

    @Option(names = "--seed", paramLabel = "S", defaultValue = "0", description = "Random seed for sampling (default 0).")
    long seed;

    @Option(names = "--ids", description = "Print the generated token ids, comma-separated, on one line (no text, no early stop).")
    boolean ids;

    @Option(names = "--stats", description = "Print prefill and decode speed on stderr.")
    boolean stats;

    @Mixin
    MaxPositions maxPositions = new MaxPositions();

    @picocli.CommandLine.Mixin
    EngineFlags engine = new EngineFlags();

    @picocli.CommandLine.Spec
    picocli.CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() {
        if (n < 1) throw new BadInputException("-n must be ≥ 1, got " + n);
        NumericOptions.finiteAtLeast("--temperature", temperature, 0);
        NumericOptions.finiteAbove("--top-p", topP, 0);
        NumericOptions.finiteIn("--top-p", topP, 0, 1);
        if (topK < 0) throw new BadInputException("--top-k must be ≥ 0 (0 = all tokens), got " + topK);
        Sampler sampler;
        try {
            sampler = temperature == 0 ? Sampler.greedy() : new Sampler(temperature, topK, topP, seed);
        } catch (IllegalArgumentException e) {
            throw new BadInputException("sampling options: " + e.getMessage());
        }
        if (dev.decodiff.harness.llamacpp.GgufCheckpointCache.isGguf(model)) model = dev.decodiff.harness.llamacpp.GgufCheckpointCache.of(model);
        int[] prompt = input.resolve(model, chat);
        var out = spec.commandLine().getOut();
        var options = engine.options();
        boolean haveTokenizer = Files.isRegularFile(model.resolve("tokenizer.json"));
        if (!ids && !haveTokenizer) throw new BadInputException(model, "has no tokenizer.json to print text; pass --ids to print token ids");
        var tunable = dev.decodiff.harness.arch.ArchitectureSupports.tunableEngineFor(model);
        try (var m = tunable.load(model, n - 1L); var tok = ids ? null : TextTokenizer.load(model)) {
            long positions = (long) prompt.length + n - 1; // the last sampled token is never fed
            maxPositions.check(model.resolve("config.json"), m.maxPositions(), positions,
                    "the prompt (" + prompt.length + " tokens) and -n " + n, "lower -n");
            tunable.checkFits(m, options);
            var session = tunable.session(m, options, null);
            long t0 = System.nanoTime();
            float[] logits;
            try {
                logits = session.forward(prompt);
            } catch (IllegalArgumentException e) {
                throw new BadInputException(model, e.getMessage());
            }
            long t1 = System.nanoTime();
            var generated = new int[n];
            var dec = tok == null ? null : tok.streamingDecoder();
            int count = 0;
            for (int i = 0; i < n; i++) {
                int next = sampler.sample(logits);
                generated[count++] = next;
                if (dec != null) {
                    if (tok.isStop(next)) break;
                    out.print(dec.push(next));
                    out.flush();
                }
                if (i + 1 < n) logits = session.forward(new int[]{next});
            }
            long t2 = System.nanoTime();
            if (ids) out.println(TokenInput.ids(java.util.Arrays.copyOf(generated, count)));
            else {
                out.println(dec.flush());
            }
            out.flush();
            if (stats) {
                var err = spec.commandLine().getErr();
                err.printf(Locale.ROOT, "prefill: %d tokens in %.3fs (%.1f tok/s); decode: %d tokens in %.3fs (%.2f tok/s)%n",
                        prompt.length, (t1 - t0) / 1e9, prompt.length / ((t1 - t0) / 1e9), Math.max(0, count - 1), (t2 - t1) / 1e9,
                        Math.max(0, count - 1) / Math.max(1e-9, (t2 - t1) / 1e9));
                err.flush();
            }
        }
        return Main.MATCH;
    }
}
