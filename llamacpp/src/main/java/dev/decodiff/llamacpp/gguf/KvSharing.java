package dev.decodiff.llamacpp.gguf;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Which earlier layer's keys and values a KV-shared layer reads. transformers takes the last non-shared layer of
 * the same type (sliding or full); llama.cpp v0.5.0's gemma4 (llama-model.cpp, the KV cache's reuse callback)
 * assumes the last two non-shared layers are one sliding then one full layer and takes the second-to-last for
 * sliding layers and the last for full ones. Where the two differ, llama.cpp reads the wrong cache: a cache of the
 * other type makes it abort (GGML_ASSERT in llama-kv-cache.cpp, which ends the process), one of the same type
 * gives silently wrong attention.
 */
public final class KvSharing {
    /** A shared layer whose source differs; {@code abort} when llama.cpp's source is a layer of the other type. */
    public record Mismatch(int layer, int transformersSource, int llamaCppSource, boolean abort) {
        @Override
        public String toString() {
            return "layer " + layer + " reads layer " + llamaCppSource + "'s cache in llama.cpp but layer " + transformersSource
                    + "'s in transformers" + (abort ? " (a cache of the other attention type: llama.cpp aborts)" : "");
        }
    }

    private KvSharing() {}

    /** The mismatches of a gemma4 GGUF's metadata (empty when the file has no KV-shared layers). */
    public static List<Mismatch> llamaCppMismatches(Map<String, GgufValue> metadata) {
        var pattern = metadata.get("gemma4.attention.sliding_window_pattern");
        var shared = metadata.get("gemma4.attention.shared_kv_layers");
        if (pattern == null || shared == null) return List.of();
        var swa = pattern.asList().stream().map(o -> (Boolean) o).toList();
        return llamaCppMismatches(swa, (int) shared.asLong());
    }

    /** The mismatches of a layer layout: true = sliding, per layer; the last {@code nShared} layers share KV. */
    public static List<Mismatch> llamaCppMismatches(List<Boolean> isSwa, int nShared) {
        int first = isSwa.size() - nShared;
        var out = new ArrayList<Mismatch>();
        if (nShared <= 0 || first < 1) return out;
        for (int il = first; il < isSwa.size(); il++) {
            boolean s = isSwa.get(il);
            int hf = -1;
            for (int j = first - 1; j >= 0; j--) if (isSwa.get(j) == s) { hf = j; break; }
            int llama = first - (s ? 2 : 1);
            if (hf != llama) out.add(new Mismatch(il, hf, llama, llama < 0 || isSwa.get(llama) != s));
        }
        return out;
    }
}
