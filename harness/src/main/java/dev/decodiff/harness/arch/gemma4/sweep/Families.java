package dev.decodiff.harness.arch.gemma4.sweep;

import dev.decodiff.engine.Gemma4Config;
import dev.decodiff.engine.LayerType;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * The scenario families, each built at a length L (a {@link Boundary}): pairs of schedules that hold the same tokens
 * and must therefore give the same rows. Schedule A is the plain way; B the cache operation under test.
 */
public final class Families {
    /** Decode steps after the operation under test: two, so that a row written at the first is read at the second. */
    static final int DECODE = 2;
    /** How far a source sequence runs past the prefix that is reused or cut back to. */
    static final int ADVANCE = 3;
    /** Where the context-shift family places its sequence before moving it back to 0: past a whole window. */
    static int shiftOffset(Gemma4Config c) { return Math.max(2, c.slidingWindow()) + ADVANCE; }

    /**
     * @param exactOnly its schedules split the same rows into different steps, which only exact (f32) K/V caches owe
     *                  the same bits for (a quantized cache rounds the history, not the step's own rows)
     */
    public record Family(String name, String description, boolean exactOnly, boolean needsBatch, Builder builder) {}

    @FunctionalInterface
    public interface Builder {
        Scenario build(Family f, Gemma4Config cfg, Boundary at, Scenario.Settings settings, boolean keepsWholeHistory);
    }

    private Families() {}

    public static List<Family> all(Gemma4Config cfg) {
        int w = Math.max(2, cfg.slidingWindow());
        var out = new ArrayList<Family>();
        out.add(new Family("prefill-vs-decode", "one pass over L+2 tokens vs a prefill of L then two one-token steps", true, false,
                (f, c, b, s, k) -> pair(f, c, b, s, List.of(feed(b.length() + DECODE)), concat(List.of(feed(b.length())), ones(DECODE)))));
        for (int chunk : new int[]{2, w - 1, w + 1}) {
            if (chunk < 2) continue;
            out.add(new Family("chunked-prefill-" + chunk, "one pass over L tokens vs chunks of " + chunk, true, false,
                    (f, c, b, s, k) -> pair(f, c, b, s, List.of(feed(b.length())), chunks(b.length(), chunk))));
        }
        out.add(new Family("speculative-verify", "a prefill of L then three one-token steps vs one verify step of three tokens", true, false,
                (f, c, b, s, k) -> pair(f, c, b, s, concat(List.of(feed(b.length())), ones(3)), List.of(feed(b.length()), feed(3)))));
        out.add(new Family("verify-reject", "a verify step of three tokens, two rejected (cut back to L+1) and decoded again, vs plain decode", false, false,
                (f, c, b, s, k) -> cut(f, c, b, s, k, b.length() + 3, b.length() + 1, concat(List.of(feed(b.length())), ones(3)),
                        concat(List.of(feed(b.length()), feed(3), new Op.Truncate(0, b.length() + 1)), ones(2)))));
        out.add(new Family("snapshot-restore", "cold = warm: a snapshot at L, three steps on, restored, then the same two steps", false, false,
                (f, c, b, s, k) -> pair(f, c, b, s, concat(List.of(feed(b.length())), ones(DECODE)),
                        concat(concat(List.of(feed(b.length()), new Op.Snapshot(0, "s")), ones(ADVANCE)), concat(List.of(new Op.Restore(0, "s")), ones(DECODE))))));
        out.add(new Family("prefix-copy", "a prefix of L copied to a second sequence that goes on from there, vs that sequence run cold", false, false,
                (f, c, b, s, k) -> copy(f, c, b, s, k, 0)));
        out.add(new Family("prefix-reuse-after-advance", "the first L positions of a sequence that ran 3 further reused by a second one, vs it run cold", false, false,
                (f, c, b, s, k) -> copy(f, c, b, s, k, ADVANCE)));
        out.add(new Family("truncate-continue", "a sequence of L+3 cut back to L and decoded on, vs decoding from L directly", false, false,
                (f, c, b, s, k) -> cut(f, c, b, s, k, b.length() + ADVANCE, b.length(), concat(List.of(feed(b.length())), ones(DECODE)),
                        concat(List.of(feed(b.length() + ADVANCE), new Op.Truncate(0, b.length())), ones(DECODE)))));
        // Attention depends on positions only through their differences (RoPE, the window): a sequence computed D
        // positions on holds the same rows as one from 0, except its rotated q/k; moving it back by D re-rotates the
        // cached keys (the K-shift), after which every row of the steps that follow must be the cold run's.
        out.add(new Family("context-shift", "a sequence placed " + shiftOffset(cfg) + " positions on, moved back to 0 by llama_memory_seq_add (keys re-rotated) and decoded on, vs it run from 0", true, false,
                (f, c, b, s, k) -> pair(f, c, b, s, concat(List.of(feed(b.length())), ones(DECODE)),
                        concat(List.of(new Op.Offset(0, shiftOffset(c)), feed(b.length()), new Op.Shift(0, -shiftOffset(c))), ones(DECODE)))));
        out.add(new Family("multi-sequence-batch", "two sequences fed in one batch (prefills, then one token each per step) vs each on its own", false, true,
                (f, c, b, s, k) -> {
                    var streams = Map.of(0, stream(c, 0, b.length() + DECODE), 1, stream(c, 1, b.length() + DECODE));
                    var a = new ArrayList<Op>(List.of(feed(b.length()), new Op.Feed(1, b.length())));
                    var bb = new ArrayList<Op>(List.of(new Op.Batch(List.of(feed(b.length()), new Op.Feed(1, b.length())))));
                    for (int i = 0; i < DECODE; i++) {
                        a.add(feed(1));
                        a.add(new Op.Feed(1, 1));
                        bb.add(new Op.Batch(List.of(feed(1), new Op.Feed(1, 1))));
                    }
                    return new Scenario(f.name() + "@" + b.length(), f.name(), b, streams, List.of(a, bb), s, null);
                }));
        return out;
    }

    private static Scenario pair(Family f, Gemma4Config c, Boundary b, Scenario.Settings s, List<Op> a, List<Op> bb) {
        int need = Math.max(reach(a), reach(bb));
        return new Scenario(f.name() + "@" + b.length(), f.name(), b, Map.of(0, stream(c, 0, need)), List.of(a, bb), s, null);
    }

    /** Sequence 0 runs to {@code from} then is cut back to {@code to}: undefined for a ring of the window only once it wrapped past what position {@code to} reads. */
    private static Scenario cut(Family f, Gemma4Config c, Boundary b, Scenario.Settings s, boolean whole, int from, int to, List<Op> a, List<Op> bb) {
        return pair(f, c, b, s, a, bb).withUndefined(undefined(c, whole, from, to));
    }

    private static Scenario copy(Family f, Gemma4Config c, Boundary b, Scenario.Settings s, boolean whole, int advance) {
        int L = b.length();
        int[] s0 = stream(c, 0, L + advance);
        int[] s1 = Arrays.copyOf(s0, L + DECODE);
        int[] tail = stream(c, 1, L + DECODE);
        System.arraycopy(tail, L, s1, L, DECODE);
        var a = concat(List.of(new Op.Feed(1, L)), ones(1, DECODE));
        var bb = concat(List.of(feed(L + advance), new Op.Copy(0, 1, L)), ones(1, DECODE));
        return new Scenario(f.name() + "@" + L, f.name(), b, Map.of(0, s0, 1, s1), List.of(a, bb), s, undefined(c, whole, L + advance, L));
    }

    /**
     * Why cutting a sequence of {@code length} positions back to {@code to} leaves what a sliding ring of W slots can
     * honour, or null when it does not: the next token at {@code to} reads to−W+1…to−1, the ring holds length−W…length−1.
     */
    static String undefined(Gemma4Config c, boolean keepsWholeHistory, int length, int to) {
        int w = c.slidingWindow();
        boolean sliding = c.layers().stream().anyMatch(l -> l.type() == LayerType.SLIDING);
        if (!sliding || keepsWholeHistory || length <= w || to >= length - 1) return null;
        return "a sliding ring of " + w + " slots holding positions " + (length - w) + "…" + (length - 1) + " is cut back to " + to
                + ", whose next token reads positions " + Math.max(0, to - w + 1) + "…" + (to - 1);
    }

    /** The deterministic token stream of a sequence: BOS, then a pattern over the vocabulary that differs per sequence. */
    public static int[] stream(Gemma4Config c, int seq, int n) {
        int vocab = c.vocabSize();
        var t = new int[n];
        for (int i = 0; i < n; i++)
            t[i] = i == 0 ? Math.min(2, vocab - 1) : 4 + (int) ((i * 7919L + seq * 104_729L) % Math.max(1, vocab - 4));
        return t;
    }

    static Op.Feed feed(int n) { return new Op.Feed(0, n); }

    static List<Op> ones(int n) { return ones(0, n); }

    static List<Op> ones(int seq, int n) {
        var out = new ArrayList<Op>();
        for (int i = 0; i < n; i++) out.add(new Op.Feed(seq, 1));
        return out;
    }

    static List<Op> chunks(int total, int chunk) {
        var out = new ArrayList<Op>();
        for (int p = 0; p < total; p += chunk) out.add(feed(Math.min(chunk, total - p)));
        return out;
    }

    static List<Op> concat(List<Op> a, List<Op> b) {
        var out = new ArrayList<Op>(a);
        out.addAll(b);
        return out;
    }

    /** Tokens of sequence 0 a schedule reaches. */
    private static int reach(List<Op> ops) {
        int len = 0, max = 0;
        for (var op : ops) {
            if (op instanceof Op.Feed f && f.seq() == 0) len += f.n();
            if (op instanceof Op.Truncate t && t.seq() == 0) len = t.length();
            max = Math.max(max, len);
        }
        return max;
    }
}
