package dev.decodiff.llamacpp;

import dev.decodiff.engine.Gemma4Config;
import dev.decodiff.llamacpp.ffi.GgufPreflight;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Whether a GGUF given by the user can be the checkpoint a reference was made from: its Gemma 4 hyperparameters
 * against config.json. (A GGUF carries no hash of the Hugging Face files; a GGUF of another model would only
 * diverge, so this turns that into a plain refusal.)
 */
public final class GgufMatch {
    private GgufMatch() {}

    /** The hyperparameters that differ, as "name gguf≠config" (empty when they all agree). */
    public static List<String> differences(Path gguf, Gemma4Config c) {
        var h = GgufPreflight.check(gguf);
        var out = new ArrayList<String>();
        if (!h.architecture().equals("gemma4")) out.add("architecture " + h.architecture() + "≠gemma4");
        compare(out, "block_count", h.integer("block_count", -1), c.numLayers());
        compare(out, "embedding_length", h.integer("embedding_length", -1), c.hidden());
        compare(out, "attention.head_count", h.integer("attention.head_count", -1), c.numHeads());
        compare(out, "expert_count", h.integer("expert_count", 0), c.moe() ? c.numExperts() : 0);
        compare(out, "embedding_length_per_layer_input", h.integer("embedding_length_per_layer_input", 0), c.pleDim());
        compare(out, "attention.shared_kv_layers", h.integer("attention.shared_kv_layers", 0), c.numKvSharedLayers());
        compare(out, "attention.sliding_window", h.integer("attention.sliding_window", -1), c.slidingWindow());
        return out;
    }

    /** As {@link #differences(Path, Gemma4Config)} for a Qwen3.5 checkpoint (architecture qwen35, or qwen35moe with experts). */
    public static List<String> differences(Path gguf, dev.decodiff.engine.qwen35.Qwen35Config c) {
        var h = GgufPreflight.check(gguf);
        var out = new ArrayList<String>();
        String arch = c.moe() ? "qwen35moe" : "qwen35";
        if (!h.architecture().equals(arch)) out.add("architecture " + h.architecture() + "≠" + arch);
        compare(out, "block_count", h.integer("block_count", -1), c.numLayers());
        compare(out, "embedding_length", h.integer("embedding_length", -1), c.hidden());
        compare(out, "attention.head_count", h.integer("attention.head_count", -1), c.numHeads());
        compare(out, "ssm.group_count", h.integer("ssm.group_count", -1), c.linearKeyHeads());
        compare(out, "ssm.time_step_rank", h.integer("ssm.time_step_rank", -1), c.linearValueHeads());
        compare(out, "expert_count", h.integer("expert_count", 0), c.moe() ? c.numExperts() : 0);
        return out;
    }

    /** As {@link #differences(Path, Gemma4Config)} for a Llama-family checkpoint (architecture llama, or qwen3). */
    public static List<String> differences(Path gguf, dev.decodiff.engine.llama.LlamaConfig c) {
        var h = GgufPreflight.check(gguf);
        var out = new ArrayList<String>();
        String arch = c.modelType().equals(dev.decodiff.engine.llama.LlamaConfig.QWEN3) ? "qwen3" : "llama";
        if (!h.architecture().equals(arch)) out.add("architecture " + h.architecture() + "≠" + arch);
        compare(out, "block_count", h.integer("block_count", -1), c.numLayers());
        compare(out, "embedding_length", h.integer("embedding_length", -1), c.hidden());
        compare(out, "attention.head_count", h.integer("attention.head_count", -1), c.numHeads());
        compare(out, "attention.head_count_kv", h.integer("attention.head_count_kv", c.numHeads()), c.numKvHeads());
        return out;
    }

    /** The differences for whichever architecture the checkpoint folder holds (Gemma 4, Qwen3.5 or the Llama family). */
    public static List<String> differences(Path gguf, Path checkpoint) {
        var arch = dev.decodiff.engine.arch.Architectures.of(checkpoint);
        if (arch == dev.decodiff.engine.arch.Gemma4Architecture.INSTANCE)
            return differences(gguf, Gemma4Config.read(checkpoint.resolve("config.json")));
        if (arch == dev.decodiff.engine.llama.LlamaArchitecture.INSTANCE)
            return differences(gguf, dev.decodiff.engine.llama.LlamaConfig.read(checkpoint.resolve("config.json")));
        return differences(gguf, dev.decodiff.engine.qwen35.Qwen35Config.read(checkpoint.resolve("config.json")));
    }

    private static void compare(List<String> out, String key, long gguf, long config) {
        if (gguf != config) out.add(key + " " + gguf + "≠" + config);
    }
}
