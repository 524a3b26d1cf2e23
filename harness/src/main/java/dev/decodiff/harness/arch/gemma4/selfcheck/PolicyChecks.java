package dev.decodiff.harness.arch.gemma4.selfcheck;

import dev.decodiff.harness.selfcheck.Agreement;
import dev.decodiff.harness.selfcheck.RowRecorder;
import dev.decodiff.harness.selfcheck.SelfCheckResult;
import dev.decodiff.harness.report.Fmt;
import dev.decodiff.engine.CacheTruncationException;
import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.engine.InferenceSession;
import dev.decodiff.engine.PrefixCache;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Reference-free checks of the KV-cache policies engines get wrong: prefix reuse, multi-turn sessions, snapshot
 * restore and truncation must reproduce a fresh computation to fp32 noise; the naive keep-last-N trim must not,
 * and the report says where it departs and why.
 */
public final class PolicyChecks {
    private final Gemma4Model model;
    private final EngineOptions options;

    public PolicyChecks(Gemma4Model model, EngineOptions options) {
        this.model = model;
        this.options = options.withProbe(null);
    }

    public List<SelfCheckResult> runAll(int[] tokens, int promptLength) {
        var out = new ArrayList<SelfCheckResult>();
        out.add(prefixReuse(tokens, promptLength));
        out.add(multiTurnSession(tokens, promptLength));
        out.add(snapshotRestore(tokens, promptLength));
        out.add(truncateToSharedPrefix(tokens, promptLength));
        out.add(naiveTrim(tokens, promptLength));
        return out;
    }

    /** Feeds tokens[from, to) one step per split into the session and records rows. */
    private static void feed(InferenceSession s, int[] tokens, int from, int[] splits) {
        int pos = from;
        for (int len : splits) {
            s.forward(Arrays.copyOfRange(tokens, pos, pos + len));
            pos += len;
        }
    }

    private static int[] ones(int n) {
        var a = new int[n];
        Arrays.fill(a, 1);
        return a;
    }

    /** Fresh: prompt in one step, then one token per step. */
    private RowRecorder fresh(int[] tokens, int promptLength) {
        var rec = new RowRecorder();
        var s = model.newSession(options.withProbe(rec));
        s.forward(Arrays.copyOf(tokens, promptLength));
        feed(s, tokens, promptLength, ones(tokens.length - promptLength));
        return rec;
    }

    /** A shared "system prompt" boundary inside the prompt, past the sliding window when the prompt allows. */
    private int boundary(int promptLength) {
        int w = model.config().slidingWindow();
        return promptLength > w + 2 ? w + 1 : Math.max(1, promptLength / 2);
    }

    public SelfCheckResult prefixReuse(int[] tokens, int promptLength) {
        int b = boundary(promptLength);
        var cache = new PrefixCache();
        var first = model.newSession(options);
        first.forward(Arrays.copyOf(tokens, b));
        cache.store(first.snapshot());
        var rec = new RowRecorder();
        var resumed = cache.resume(model, options.withProbe(rec), Arrays.copyOf(tokens, promptLength));
        if (resumed.reusedTokens() != b)
            return fail("prefix-reuse", "a stored prefix of " + b + " tokens was not reused (reused " + resumed.reusedTokens() + ")");
        feed(resumed.session(), tokens, promptLength, ones(tokens.length - promptLength));
        return Agreement.firstDisagreement("prefix-reuse",
                "snapshot at token " + b + " reused for a new request, then decode, vs fresh", fresh(tokens, promptLength), rec);
    }

    public SelfCheckResult multiTurnSession(int[] tokens, int promptLength) {
        // Turn 1: the prompt and three replies; turn 2: the next four tokens as one user message; then decode.
        int decode = tokens.length - promptLength;
        if (decode < 8) return SelfCheckResult.pass("multi-turn-session", "session kept across turns vs fresh", "too few tokens to split into turns");
        var splits = new ArrayList<Integer>();
        splits.add(promptLength);
        for (int i = 0; i < 3; i++) splits.add(1);
        splits.add(4);
        for (int i = 0; i < decode - 7; i++) splits.add(1);
        var rec = new RowRecorder();
        var s = model.newSession(options.withProbe(rec));
        feed(s, tokens, 0, splits.stream().mapToInt(Integer::intValue).toArray());
        return Agreement.firstDisagreement("multi-turn-session",
                "one session across two turns (only new tokens processed) vs fresh", fresh(tokens, promptLength), rec);
    }

    public SelfCheckResult snapshotRestore(int[] tokens, int promptLength) {
        var first = model.newSession(options);
        first.forward(Arrays.copyOf(tokens, promptLength));
        var snap = first.snapshot();
        first.forward(new int[]{tokens[promptLength]}); // the original moves on; the snapshot must not
        var rec = new RowRecorder();
        var restored = model.newSession(options.withProbe(rec));
        restored.restore(snap);
        feed(restored, tokens, promptLength, ones(tokens.length - promptLength));
        return Agreement.firstDisagreement("snapshot-restore",
                "decode from a restored snapshot of the prompt vs fresh", fresh(tokens, promptLength), rec);
    }

    /**
     * A session that ran the whole sequence is cut back to a shared prefix and continued with the same tokens.
     * Full-attention caches may be cut anywhere; sliding rings must refuse (they overwrote what is needed).
     */
    public SelfCheckResult truncateToSharedPrefix(int[] tokens, int promptLength) {
        String check = "truncate-sliding";
        String desc = "cut a session back to a shared prefix and continue vs fresh (sliding rings must refuse)";
        int b = boundary(promptLength);
        var s = model.newSession(options);
        s.forward(Arrays.copyOf(tokens, promptLength));
        feed(s, tokens, promptLength, ones(tokens.length - promptLength));
        boolean hasSliding = model.config().layers().stream().anyMatch(l -> l.type() == dev.decodiff.engine.LayerType.SLIDING);
        try {
            s.truncate(b);
        } catch (CacheTruncationException e) {
            return SelfCheckResult.pass(check, desc, "refused as it must: " + e.getMessage());
        }
        if (!hasSliding) return SelfCheckResult.pass(check, desc, "no sliding layers: full caches cut back to " + b);
        var rec = new RowRecorder();
        s.setProbe(rec);
        feed(s, tokens, b, ones(tokens.length - b));
        var freshRec = new RowRecorder();
        var f = model.newSession(options.withProbe(freshRec));
        f.forward(Arrays.copyOf(tokens, b));
        feed(f, tokens, b, ones(tokens.length - b));
        var r = Agreement.firstDisagreement(check, desc, freshRec, rec);
        if (r.passed()) return r;
        return new SelfCheckResult(check, desc, false, r.position(), r.point(), r.relL2(), r.tolerance(),
                "a sliding cache was cut back to " + b + " past its valid point and reused without a word: " + r.detail());
    }

    /** Expected to diverge: the report names where and explains why. Passes when it diverges, as it must. */
    public SelfCheckResult naiveTrim(int[] tokens, int promptLength) {
        String check = "naive-trim-diverges";
        String desc = "keep-last-N trim vs a fresh prefill of the kept tokens (must diverge)";
        int keep = Math.max(2, promptLength / 2);
        int drop = promptLength - keep;
        var trimmed = model.newSession(options);
        trimmed.forward(Arrays.copyOf(tokens, promptLength));
        trimmed.keepLast(keep);
        var rec = new RowRecorder();
        trimmed.setProbe(rec);
        int[] tail = Arrays.copyOfRange(tokens, drop, tokens.length);
        feed(trimmed, tail, keep, ones(tail.length - keep));
        var fresh = new RowRecorder();
        var f = model.newSession(options.withProbe(fresh));
        f.forward(Arrays.copyOf(tail, keep));
        feed(f, tail, keep, ones(tail.length - keep));
        var r = Agreement.firstDisagreement(check, desc, fresh, rec);
        if (r.passed())
            return fail(check, "the trimmed session matched a fresh prefill of the kept tokens, which is impossible unless the trim re-ran them");
        return SelfCheckResult.pass(check, desc, "diverges as expected at position " + r.position() + ", " + r.point()
                + " (rel L2 " + Fmt.format("%.3g", r.relL2()) + "): the " + keep + " kept cache rows were computed with the "
                + drop + " dropped tokens in context and their keys stay rotated at their old positions, so the first token after the trim attends over different keys than a fresh prefill");
    }

    private static SelfCheckResult fail(String check, String detail) {
        return new SelfCheckResult(check, detail, false, null, null, Double.NaN, 0, detail);
    }
}
