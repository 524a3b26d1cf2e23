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

    private static void compare(List<String> out, String key, long gguf, long config) {
        if (gguf != config) out.add(key + " " + gguf + "≠" + config);
    }
}
