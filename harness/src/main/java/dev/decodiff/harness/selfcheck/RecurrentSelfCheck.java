package dev.decodiff.harness.selfcheck;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.Probe;
import dev.decodiff.engine.arch.LoadedModel;
import dev.decodiff.engine.arch.ModelSession;
import dev.decodiff.harness.compare.CellStats;
import dev.decodiff.harness.report.Fmt;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Supplier;

/**
 * The reference-free checks of a model with recurrent caches (Qwen3.5's conv and linear-attention states), through
 * the plug-in seam. A recurrent state has no per-position history to re-read: the only way to continue a conversation
 * is to hand the state over intact, so every check is about the hand-over: prefill in chunks (transformers' 64-token
 * chunked kernel) against one-token steps (its recurrent kernel) capture by capture, snapshot/restore bit-identical,
 * prefix reuse with the recurrent state checkpointed at the prefix against a cold run, and the wrong reuse (attention
 * KV without the matching recurrent state) caught at the state read.
 */
public final class RecurrentSelfCheck {
    private final LoadedModel model;
    private final List<String> faults;

    public RecurrentSelfCheck(LoadedModel model, List<String> faults) {
        this.model = model;
        this.faults = List.copyOf(faults);
    }

    /** A prompt that crosses the first 64-token chunk boundary of the chunked kernel (bounded by the model's length). */
    public int defaultPromptLength() { return Math.min(70, model.maxPositions() - 8); }

    /** The prompt (a fixed pattern), then greedy decode steps that roll the conv window over several times. */
    public int[] defaultTokens() {
        int vocab = model.vocabSize(), prompt = defaultPromptLength(), decode = 8;
        var all = new int[prompt + decode];
        all[0] = Math.min(2, vocab - 1);
        for (int i = 1; i < all.length; i++) all[i] = 4 + (int) ((i * 7919L) % Math.max(1, vocab - 4));
        try {
            var s = session(null);
            float[] logits = s.forward(Arrays.copyOf(all, prompt));
            for (int p = prompt; p < all.length; p++) {
                all[p] = argmax(logits);
                if (p + 1 < all.length) logits = s.forward(new int[]{all[p]});
            }
        } catch (RuntimeException e) {
            // an engine that throws is still checked (each check reports it); the prompt's pattern continues
        }
        return all;
    }

    /** Where prefix reuse splits a prompt of this length: past the first chunk boundary, not at a chunk edge. */
    /** Where prefix-reuse checkpoints a prompt of this length (and so where a wrong reuse first shows). */
    public static int prefixLength(int promptLength) { return Math.max(1, promptLength * 4 / 7); }

    public List<SelfCheckResult> runAll(int[] tokens, int promptLength) {
        var plan = new ArrayList<Supplier<SelfCheckResult>>();
        plan.add(() -> stateReadsMatchWrites(tokens, promptLength));
        plan.add(() -> split("decode-vs-prefill", "prompt prefill + one-token decode steps vs one-token steps throughout",
                tokens, Agreement.decodeSplits(tokens.length, promptLength)));
        plan.add(() -> split("chunked-prefill-all", "all " + tokens.length + " tokens in one pass (chunked kernel, "
                + (tokens.length + 63) / 64 + " chunks) vs one-token steps", tokens, new int[]{tokens.length}));
        for (int chunk : new int[]{3, 65}) plan.add(() -> split("chunked-prefill-" + chunk, "prefill in chunks of " + chunk
                + " (the state handed from chunk to chunk) vs one-token steps", tokens, chunks(tokens.length, chunk)));
        plan.add(() -> instrumentedVsPlain(tokens, promptLength));
        plan.add(() -> snapshotRestore(tokens, promptLength));
        plan.add(() -> prefixReuse(tokens, promptLength));
        plan.add(() -> wrongReuse(tokens, promptLength, false));
        plan.add(() -> wrongReuse(tokens, promptLength, true));
        return plan.stream().map(RecurrentSelfCheck::guarded).toList();
    }

    private static SelfCheckResult guarded(Supplier<SelfCheckResult> check) {
        try {
            return check.get();
        } catch (RuntimeException e) {
            var f = dev.decodiff.harness.compare.EngineFailure.of(0, e);
            return new SelfCheckResult("engine-threw", "the engine ran every check to the end", false, null, null, Double.NaN, 0,
                    "the engine threw: " + f.what() + (f.frames().isEmpty() ? "" : " (at " + f.frames().getFirst() + ")"));
        }
    }

    private ModelSession session(Probe probe) { return model.newSession(probe, faults); }

    private RowRecorder record(int[] tokens, int[] splits) {
        var rec = new RowRecorder();
        var s = session(rec);
        int pos = 0;
        for (int len : splits) {
            s.forward(Arrays.copyOfRange(tokens, pos, pos + len));
            pos += len;
        }
        return rec;
    }

    private RowRecorder tokenSteps;

    /** Every token its own step (the recurrent kernel from the second on): the path each other split is held to. */
    private RowRecorder tokenSteps(int[] tokens) {
        if (tokenSteps == null) tokenSteps = record(tokens, chunks(tokens.length, 1));
        return tokenSteps;
    }

    private SelfCheckResult split(String check, String description, int[] tokens, int[] splits) {
        return Agreement.firstDisagreement(check, description, tokenSteps(tokens), record(tokens, splits));
    }

    static int[] chunks(int n, int chunk) {
        var out = new int[(n + chunk - 1) / chunk];
        for (int i = 0; i < out.length; i++) out[i] = Math.min(chunk, n - i * chunk);
        return out;
    }

    /**
     * Every state a step reads is the state the step before wrote, bit for bit ({@link StateAudit}), along three
     * splits: one-token steps, prompt then decode, chunks of 3.
     */
    public SelfCheckResult stateReadsMatchWrites(int[] tokens, int promptLength) {
        String c = "state-reads-match-writes", d = "each step reads the conv and recurrent states the step before wrote (bit-identical)";
        int reads = 0;
        for (int[] splits : List.of(chunks(tokens.length, 1), Agreement.decodeSplits(tokens.length, promptLength), chunks(tokens.length, 3))) {
            var audit = new StateAudit();
            var s = session(audit);
            int pos = 0;
            for (int len : splits) {
                s.forward(Arrays.copyOfRange(tokens, pos, pos + len));
                pos += len;
            }
            reads += audit.reads;
            if (audit.first != null) {
                var v = audit.first;
                return new SelfCheckResult(c, d, false, v.position(), v.point(), v.relL2(), 0, Fmt.format(
                        "%d of %d state reads are not what the step before wrote; first at step %d (steps of %s), position %d, %s (rel L2 %.3g)",
                        audit.violations, audit.reads, v.step(), splits.length == tokens.length ? "1 token" : splits[0] == promptLength
                                ? "prompt then 1 token" : "3 tokens", v.position(), v.point(), v.relL2()));
            }
        }
        return SelfCheckResult.pass(c, d, reads + " state reads equal the state written the step before");
    }

    public SelfCheckResult instrumentedVsPlain(int[] tokens, int promptLength) {
        String d = "logits with every probe attached vs none (bit-identical)";
        var plain = session(null);
        var probed = session((point, shape, data) -> null);
        int pos = 0, step = 0;
        for (int len : Agreement.decodeSplits(tokens.length, promptLength)) {
            var chunk = Arrays.copyOfRange(tokens, pos, pos + len);
            float[] a = plain.forward(chunk), b = probed.forward(chunk);
            if (!Arrays.equals(a, b))
                return new SelfCheckResult("instrumented-vs-plain", d, false, pos + len - 1, CapturePoints.LOGITS, CellStats.relL2(b, a), 0,
                        "attaching probes changed the logits at step " + step);
            pos += len;
            step++;
        }
        return SelfCheckResult.pass("instrumented-vs-plain", d, step + " steps bit-identical");
    }

    /**
     * Prompt, snapshot, decode; then the same decode again twice from the snapshot: restored into the session that
     * went on, and into a fresh one. Every capture must be bit-identical: a snapshot is a copy, not a recomputation.
     */
    public SelfCheckResult snapshotRestore(int[] tokens, int promptLength) {
        String c = "snapshot-restore", d = "decode after restoring a snapshot (into the same and a fresh session) vs straight on (bit-identical)";
        var first = new RowRecorder();
        var s = session(null);
        s.forward(Arrays.copyOf(tokens, promptLength));
        var snap = s.snapshot();
        s.setProbe(first);
        decode(s, tokens, promptLength);
        var again = new RowRecorder();
        s.restore(snap);
        s.setProbe(again);
        decode(s, tokens, promptLength);
        var r = Agreement.firstDisagreement(c, d, first, again, 0);
        if (!r.passed()) return r;
        var fresh = session(null);
        var other = new RowRecorder();
        fresh.restore(snap);
        fresh.setProbe(other);
        decode(fresh, tokens, promptLength);
        return Agreement.firstDisagreement(c, d, first, other, 0);
    }

    private static void decode(ModelSession s, int[] tokens, int from) {
        for (int p = from; p < tokens.length; p++) s.forward(new int[]{tokens[p]});
    }

    /**
     * A prompt cache: the conversation's prefix is run once and checkpointed (every cache, the recurrent states
     * included); another conversation goes on from it; then this one is resumed from the checkpoint. From the prefix
     * on it must equal a cold run split the same way.
     */
    public SelfCheckResult prefixReuse(int[] tokens, int promptLength) {
        int prefix = prefixLength(promptLength);
        var reused = resumed(tokens, promptLength, prefix, s -> s);
        return Agreement.firstDisagreement("prefix-reuse", "resumed from a checkpoint at position " + prefix
                + " (after another conversation went on from it) vs a cold run", cold(tokens, promptLength, prefix), reused);
    }

    /**
     * The wrong reuse must be caught, at the state read of the first position after the prefix: the attention KV of
     * the prefix restored with zero recurrent states, or with the recurrent states of a checkpoint 5 tokens earlier.
     * Passes when the first disagreement with the cold run is a state read at that position.
     */
    public SelfCheckResult wrongReuse(int[] tokens, int promptLength, boolean otherLength) {
        int prefix = prefixLength(promptLength), earlier = Math.max(1, prefix - 5);
        String check = otherLength ? "wrong-reuse-other-length" : "wrong-reuse-without-state";
        String d = otherLength ? "the prefix's attention KV with the recurrent states of position " + earlier + " must be caught at the state read"
                : "the prefix's attention KV without its recurrent states (zeros) must be caught at the state read";
        ModelSession.State[] atEarlier = new ModelSession.State[1];
        var reused = resumed(tokens, promptLength, prefix, otherLength ? snap -> {
            if (atEarlier[0] == null) {
                var e = session(null);
                e.forward(Arrays.copyOf(tokens, earlier));
                atEarlier[0] = e.snapshot();
            }
            return snap.withRecurrentStateOf(atEarlier[0]);
        } : ModelSession.State::withoutRecurrentState);
        if (reused == null) return SelfCheckResult.pass(check, d, "not applicable: the model has no recurrent state");
        var r = Agreement.firstDisagreement(check, d, cold(tokens, promptLength, prefix), reused);
        if (r.passed())
            return new SelfCheckResult(check, d, false, prefix, null, 0, Agreement.TOLERANCE,
                    "the wrong reuse went unnoticed: every cell agrees with the cold run (" + r.detail() + ")");
        boolean atState = r.position() == prefix && r.point() != null
                && (r.point().endsWith("." + CapturePoints.LINEAR_CONV_STATE_READ) || r.point().endsWith("." + CapturePoints.LINEAR_STATE_READ));
        String where = Fmt.format("position %d, %s (rel L2 %.3g)", r.position(), r.point(), r.relL2());
        if (atState) return SelfCheckResult.pass(check, d, "caught at " + where);
        return new SelfCheckResult(check, d, false, r.position(), r.point(), r.relL2(), Agreement.TOLERANCE,
                "caught at " + where + ", not at the state read of position " + prefix);
    }

    /** A cold run split at the prefix: prefix, rest of the prompt, one-token decode steps. */
    private RowRecorder cold(int[] tokens, int promptLength, int prefix) {
        var splits = new int[2 + tokens.length - promptLength];
        splits[0] = prefix;
        splits[1] = promptLength - prefix;
        Arrays.fill(splits, 2, splits.length, 1);
        return record(tokens, splits);
    }

    /**
     * The conversation resumed from a checkpoint at the prefix, changed by {@code use} (the identity, or a wrong
     * reuse; null when the architecture offers none), recorded from the prefix on.
     */
    private RowRecorder resumed(int[] tokens, int promptLength, int prefix, java.util.function.UnaryOperator<ModelSession.State> use) {
        var s = session(null);
        s.forward(Arrays.copyOf(tokens, prefix));
        var snap = s.snapshot();
        // another conversation from the same prefix: its tokens differ from ours, so a cache it leaves behind shows
        int[] other = Arrays.copyOfRange(tokens, prefix, promptLength);
        for (int i = 0; i < other.length; i++) other[i] = (other[i] + 1 + i) % model.vocabSize();
        s.forward(other);
        s.forward(new int[]{tokens[0]});
        var restored = use.apply(snap);
        if (restored == null) return null;
        s.restore(restored);
        var rec = new RowRecorder();
        s.setProbe(rec);
        s.forward(Arrays.copyOfRange(tokens, prefix, promptLength));
        decode(s, tokens, promptLength);
        return rec;
    }

    private static int argmax(float[] v) {
        int best = 0;
        for (int j = 1; j < v.length; j++) if (v[j] > v[best]) best = j;
        return best;
    }
}
