package dev.decodiff.llamacpp;

import dev.decodiff.llamacpp.ffi.LlamaContext;
import dev.decodiff.llamacpp.ffi.LlamaCppException;
import dev.decodiff.llamacpp.ffi.LlamaCppHome;
import dev.decodiff.llamacpp.ffi.LlamaLibrary;
import dev.decodiff.llamacpp.ffi.LlamaModel;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;

/**
 * llama.cpp running a Gemma 4 GGUF step by step (one sequence, positions given by the caller), optionally capturing
 * decodiff's points from its graph. Without capture it is a plain decode loop (for timing: no callback at all).
 */
public final class LlamaCppRunner implements AutoCloseable {
    /** A captured tensor: row-major fp32 in the capture point's shape. */
    public record Captured(String point, int[] shape, float[] data) {}

    /** One step: the captured tensors by point, the last position's logits, and the points not captured with why. */
    public record Step(Map<String, Captured> tensors, float[] logits, Map<String, String> notCaptured) {}

    private final LlamaModel model;
    private final LlamaContext context;
    private final StepCapture capture;
    private final Predicate<String> wanted;
    private boolean checkedNames;

    private LlamaCppRunner(LlamaModel model, LlamaContext context, StepCapture capture, Predicate<String> wanted) {
        this.model = model;
        this.context = context;
        this.capture = capture;
        this.wanted = wanted;
    }

    /**
     * Loads {@code gguf} (a Gemma 4 GGUF) and makes a context. {@code wanted}: the capture points to record, or null
     * for a plain decode loop.
     */
    public static LlamaCppRunner open(Path gguf, LlamaContext.Options options, Predicate<String> wanted) {
        return open(gguf, options, null, wanted);
    }

    /**
     * As {@link #open(Path, LlamaContext.Options, Predicate)}, the context made with an explicit {@code layout} (null:
     * the one the options imply). A Qwen3.5 step split into several ubatches (n_ubatch smaller than it) is captured
     * as one: its rows joined in order, its state reads from the first ubatch, its state writes from the last.
     */
    public static LlamaCppRunner open(Path gguf, LlamaContext.Options options, LlamaContext.Layout layout, Predicate<String> wanted) {
        var lib = LlamaLibrary.get();
        var header = dev.decodiff.llamacpp.ffi.GgufPreflight.check(gguf);
        Gemma4Limits.check(gguf, header);
        Qwen35Limits.check(gguf, header);
        var model = LlamaModel.load(lib, gguf, false);
        try {
            ModelGraphNames graph = Qwen35GraphNames.of(model);
            if (graph == null) graph = LlamaGraphNames.of(model);
            if (!model.architecture().equals("gemma4") && graph == null)
                throw new LlamaCppException(gguf + " holds a '" + model.architecture() + "' model; decodiff compares Gemma 4 (architecture 'gemma4'),"
                        + " Qwen3.5 ('qwen35', 'qwen35moe') and the Llama family ('llama', 'qwen3')");
            var capture = wanted == null ? null : new StepCapture(wanted, graph);
            return new LlamaCppRunner(model, new LlamaContext(model, options, layout, capture), capture, wanted);
        } catch (RuntimeException e) {
            model.close();
            throw e;
        }
    }

    /**
     * Which build of llama.cpp is loaded, in one line: prebuilt, native (scripts/llamacpp-native.sh, with its cmake
     * flags and any patch) or someone's own; its folder; its CPU backend; and the CPU features llama.cpp reports using.
     */
    public static String describeBuild() {
        var lib = LlamaLibrary.get();
        var home = lib.home();
        var info = home.buildInfo();
        var s = new StringBuilder(home.kind().label).append(" at ").append(home.lib()).append("; CPU backend ").append(lib.backend());
        if (info.containsKey("cmake")) s.append("; cmake ").append(info.get("cmake"));
        if (info.containsKey("compiler")) s.append("; ").append(info.get("compiler"));
        if (info.containsKey("patch") && !info.get("patch").equals("none")) s.append("; patched with ").append(info.get("patch"));
        String features = lib.systemInfo().strip();
        if (!features.isEmpty()) s.append("; ").append(features.replaceAll("\\s*\\|\\s*$", ""));
        return s.toString();
    }

    /** "llama.cpp v0.5.0 (node-llama-cpp 3.22.1, libggml-cpu-zen4.so)", "llama.cpp v0.5.0 (native build, libggml-cpu.so (linked in))". */
    public static String describeRelease() {
        return "llama.cpp " + LlamaCppHome.RELEASE + " (" + buildLabel() + ", " + LlamaLibrary.get().backend() + ")";
    }

    /** "node-llama-cpp 3.22.1" for the prebuilt; "native build" (with its patch, if any) or "own build at DIR" otherwise. */
    public static String buildLabel() {
        var home = LlamaLibrary.get().home();
        return switch (home.kind()) {
            case PREBUILT -> "node-llama-cpp " + LlamaCppHome.PACKAGE_VERSION;
            case NATIVE -> {
                String patch = home.buildInfo().getOrDefault("patch", "none");
                yield "native build" + (patch.equals("none") ? "" : " with " + patch.replaceFirst(" \\(sha256.*", ""));
            }
            case OWN -> "own build at " + home.lib();
        };
    }

    public LlamaModel model() { return model; }

    public LlamaContext.Options options() { return context.options(); }

    /** Whether llama.cpp runs flash attention (as set, or as it resolved "auto" for this device). */
    public boolean flashAttentionOn() { return context.flashAttentionOn(); }

    /**
     * Feeds {@code tokens} at positions start… and returns the step's captures. {@code expected}: the points this step
     * must give (those of the reference); one the graph did not emit is an error naming the graph names looked for.
     */
    public Step step(int[] tokens, int start, Collection<String> expected) { return step(tokens, start, expected, Map.of()); }

    /**
     * {@link #step(int[], int, Collection)} with the graph tensors of {@code substitutes}' points replaced by the given
     * values (row-major, in the point's shape) as soon as llama.cpp computed them, so everything downstream in this
     * step — the K/V cache writes included — reads them. A replaced point is captured as llama.cpp computed it.
     */
    public Step step(int[] tokens, int start, Collection<String> expected, Map<String, float[]> substitutes) {
        if (capture == null) throw new IllegalStateException("this runner was opened without capture");
        capture.substitute(substitutes);
        float[] logits = context.decode(tokens, start, true);
        var step = capture.take(logits);
        if (!checkedNames) {
            checkedNames = true;
            List<String> missing = new ArrayList<>();
            for (String p : expected)
                if (wanted.test(p) && !step.tensors().containsKey(p) && !step.notCaptured().containsKey(p))
                    missing.add(p + " (graph name " + String.join(" or ", GraphNames.graphNamesFor(p)) + ")");
            if (!missing.isEmpty())
                throw new LlamaCppException("llama.cpp's graph emitted no tensor for " + String.join(", ", missing)
                        + ": this llama.cpp release names its tensors differently from " + LlamaCppHome.RELEASE
                        + "; update the table in GraphNames (and docs/engines/llama.cpp.md) for it, or run scripts/llamacpp.sh to use " + LlamaCppHome.RELEASE);
        }
        return step;
    }

    /** Feeds {@code tokens} at positions start… without any capture and returns the last position's logits. */
    public float[] decode(int[] tokens, int start) { return context.decode(tokens, start, false); }

    /** As {@link #decode}, with every position an output, as in a capturing step (for a like-for-like comparison). */
    public float[] decodeAllOutputs(int[] tokens, int start) { return context.decode(tokens, start, true); }

    /** Empties the KV cache. */
    public void reset() { context.clear(); }

    @Override
    public void close() {
        try {
            context.close();
        } finally {
            model.close();
        }
    }
}
