package dev.decodiff.engine;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;

/**
 * Snapshots stored at chosen token boundaries (e.g. the end of a shared system prompt). A request resumes from
 * the longest stored snapshot whose tokens are a prefix of it. Only whole snapshots are reused: a sliding-window
 * ring cannot be cut back to an earlier boundary, so reuse never extends past a stored point.
 */
public final class PrefixCache {
    private final List<KvSnapshot> snapshots = new ArrayList<>();

    public void store(KvSnapshot snapshot) { snapshots.add(snapshot); }

    public int size() { return snapshots.size(); }

    /** The longest stored snapshot of at most maxLength tokens that is a prefix of tokens. */
    public Optional<KvSnapshot> longestPrefixOf(int[] tokens, int maxLength) {
        KvSnapshot best = null;
        for (var s : snapshots) {
            int n = s.length();
            if (n > maxLength || n > tokens.length || (best != null && n <= best.length())) continue;
            if (Arrays.equals(s.tokens(), 0, n, tokens, 0, n)) best = s;
        }
        return Optional.ofNullable(best);
    }

    /**
     * Starts a session for {@code tokens}: restores the longest stored prefix (if any) and feeds the rest in one
     * step. Returns the session, positioned after the last token, and the logits of that token.
     */
    public Resumed resume(Gemma4Model model, EngineOptions options, int[] tokens) {
        var session = model.newSession(options);
        // A snapshot stores no logits, so at least the last token is always run.
        var hit = longestPrefixOf(tokens, tokens.length - 1);
        int reused = 0;
        if (hit.isPresent()) {
            session.restore(hit.get());
            reused = hit.get().length();
        }
        float[] logits = session.forward(Arrays.copyOfRange(tokens, reused, tokens.length));
        return new Resumed(session, logits, reused);
    }

    public record Resumed(InferenceSession session, float[] logits, int reusedTokens) {}
}
