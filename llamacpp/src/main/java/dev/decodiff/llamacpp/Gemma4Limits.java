package dev.decodiff.llamacpp;

import dev.decodiff.llamacpp.ffi.GgufPreflight;
import dev.decodiff.llamacpp.ffi.LlamaCppException;
import dev.decodiff.llamacpp.ffi.LlamaCppHome;
import dev.decodiff.llamacpp.gguf.KvSharing;

import java.nio.file.Path;

/**
 * Gemma 4 files the pinned llama.cpp would run into an assertion with (GGML_ASSERT aborts the whole process, the
 * JVM with it), refused beforehand with the reason. {@code -Ddecodiff.llamacpp.unchecked=true} skips the check, to
 * reproduce the abort itself.
 */
public final class Gemma4Limits {
    public static final String UNCHECKED = "decodiff.llamacpp.unchecked";

    private Gemma4Limits() {}

    /**
     * KV sharing. transformers: a shared layer of type t reads the cache of the last non-shared layer of type t.
     * llama.cpp (src/llama-model.cpp, the layer-reuse callback of GEMMA3N/GEMMA4) reads layer f−1 for a shared full
     * layer and f−2 for a shared sliding one (f = the first shared layer): right only when the last two non-shared
     * layers are [sliding, full], as in E2B and E4B. Otherwise a sliding layer looks for a full layer's cache in the
     * sliding-window cache, and llama-kv-cache.cpp asserts (map_layer_ids.find(il_reuse) != end).
     */
    public static void check(Path gguf, GgufPreflight.Header h) {
        if (!h.architecture().equals("gemma4") || Boolean.getBoolean(UNCHECKED)) return;
        long layers = h.integer("block_count", -1), shared = h.integer("attention.shared_kv_layers", 0);
        boolean[] swa = h.bools("attention.sliding_window_pattern");
        if (shared <= 0 || layers < 0 || swa == null || swa.length != layers) return;
        int f = (int) (layers - shared);
        if (f < 2)
            throw refuse(gguf, "its last " + shared + " of " + layers + " layers share KV, leaving " + f
                    + " with a cache; llama.cpp's Gemma 4 needs at least two (it asserts n_layer_kv_from_start >= 2)");
        var swaList = new java.util.ArrayList<Boolean>();
        for (boolean b : swa) swaList.add(b);
        var mismatches = KvSharing.llamaCppMismatches(swaList, (int) shared);
        if (!mismatches.isEmpty()) {
            var m = mismatches.getFirst();
            int il = m.layer(), hf = m.transformersSource(), llama = m.llamaCppSource();
            throw refuse(gguf, "shared " + kind(swa[il]) + " layer " + il + " reads the cache of layer " + hf + " (the last non-shared "
                    + kind(swa[il]) + " layer), but llama.cpp " + LlamaCppHome.RELEASE + " takes layer " + llama + " (a " + kind(swa[llama])
                    + " layer: it assumes the last two non-shared layers are [sliding, full]; here layers " + (f - 2) + ", " + (f - 1)
                    + " are [" + kind(swa[f - 2]) + ", " + kind(swa[f - 1]) + "])" + (m.abort()
                    ? " and would abort the process (GGML_ASSERT in llama-kv-cache.cpp)" : " and would attend over the wrong layer's keys"));
        }
    }

    private static String kind(boolean sliding) { return sliding ? "sliding" : "full"; }

    private static LlamaCppException refuse(Path gguf, String why) {
        return new LlamaCppException("llama.cpp " + LlamaCppHome.RELEASE + " cannot run " + gguf + ": " + why
                + "; a llama.cpp bug (docs/engines/llama.cpp.md, KV sharing), so this checkpoint cannot be compared with llama.cpp (-D"
                + UNCHECKED + "=true runs it anyway, to reproduce the abort)");
    }
}
