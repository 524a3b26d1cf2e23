package dev.decodiff.harness.arch.gemma4;

import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.engine.InferenceSession;
import dev.decodiff.engine.KvSnapshot;
import dev.decodiff.engine.PrefixCache;
import dev.decodiff.engine.arch.Gemma4Architecture;
import dev.decodiff.engine.arch.ModelSession;
import dev.decodiff.harness.arch.StoredPrefix;

/**
 * A Gemma 4 session that has read a prefix, and one snapshot of its state at the prefix's end, shared by the session's
 * rewinds and the {@link PrefixCache} it is stored in (a second copy would add the whole KV cache to the bench's RSS).
 */
record Gemma4StoredPrefix(Gemma4Model model, EngineOptions options, InferenceSession kept, KvSnapshot snapshot, PrefixCache cache)
        implements StoredPrefix {

    static Gemma4StoredPrefix read(Gemma4Model model, EngineOptions options, int[] prefix) {
        var kept = model.newSession(options);
        kept.forward(prefix);
        var snapshot = kept.snapshot();
        var cache = new PrefixCache();
        cache.store(snapshot);
        return new Gemma4StoredPrefix(model, options, kept, snapshot, cache);
    }

    @Override public ModelSession session() { return Gemma4Architecture.session(kept); }

    @Override public void rewind() { kept.restore(snapshot); }

    @Override public int resume(int[] tokens) { return cache.resume(model, options, tokens).reusedTokens(); }
}
