package dev.decodiff.harness.bench;

import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * llama.cpp's own {@code llama-bench} from the same build as the library the FFM runner loaded, run as a child process
 * on the same GGUF with the same threads, K/V type, batching (its defaults, which the runner copies) and flash
 * attention, so the runner's figures can be checked against llama.cpp's own tool: prefill is its {@code pp} test
 * ({@code -p N}), decode at a context its {@code tg} test after that many prompt tokens ({@code -n steps -d context}).
 * One repetition per call ({@code -r 1}, its own warm-up included), so the bench interleaves it with the runner round
 * by round. Its prompt tokens are its own (random ids): on a dense model the time does not depend on which they are.
 * llama-bench takes no f32 K/V cache (f16, bf16 and quantized types only).
 */
record LlamaBenchTool(Path binary, Path gguf, int threads, String kvType) {

    /** One figure of one call: the test, the context before it, tokens/s. */
    record Result(int prompt, int gen, int depth, String flashAttention, double tokensPerS) {}

    /** Prefill of {@code prefill} tokens and decode of {@code steps} tokens at each of {@code contexts}, with flash attention {@code fa} (auto, on, off). */
    List<Result> run(int prefill, int steps, int[] contexts, String fa) {
        var out = new ArrayList<Result>();
        out.addAll(call(List.of("-p", Integer.toString(prefill), "-n", "0"), fa));
        var depths = new StringBuilder();
        for (int c : contexts) depths.append(depths.isEmpty() ? "" : ",").append(c);
        out.addAll(call(List.of("-p", "0", "-n", Integer.toString(steps), "-d", depths.toString()), fa));
        return out;
    }

    private List<Result> call(List<String> test, String fa) {
        var cmd = new ArrayList<>(List.of(binary.toString(), "-m", gguf.toString(), "-t", Integer.toString(threads), "-r", "1", "-o", "jsonl",
                "-ctk", kvType, "-ctv", kvType, "-fa", fa));
        cmd.addAll(test);
        try {
            var p = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.DISCARD).start();
            String stdout = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!p.waitFor(30, TimeUnit.MINUTES)) {
                p.destroyForcibly();
                throw new IllegalStateException("llama-bench did not finish within 30 minutes: " + String.join(" ", cmd));
            }
            if (p.exitValue() != 0) throw new IllegalStateException("llama-bench failed (exit " + p.exitValue() + "): " + String.join(" ", cmd));
            var mapper = new ObjectMapper();
            var results = new ArrayList<Result>();
            for (String line : stdout.split("\n")) {
                if (!line.strip().startsWith("{")) continue;
                var j = mapper.readTree(line);
                results.add(new Result(j.path("n_prompt").asInt(), j.path("n_gen").asInt(), j.path("n_depth").asInt(), fa, j.path("avg_ts").asDouble()));
            }
            if (results.isEmpty()) throw new IllegalStateException("llama-bench printed no result: " + String.join(" ", cmd));
            return results;
        } catch (IOException e) {
            throw new IllegalStateException("cannot run llama-bench (" + binary + "): " + e.getMessage(), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while llama-bench ran", e);
        }
    }
}
