package dev.decodiff.harness.arch.gemma4.selfcheck;

import dev.decodiff.harness.selfcheck.Agreement;
import dev.decodiff.harness.selfcheck.RowRecorder;
import dev.decodiff.harness.selfcheck.SelfCheckResult;
import dev.decodiff.harness.compare.CellStats;
import dev.decodiff.harness.report.Fmt;
import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.engine.Probe;
import dev.decodiff.engine.Sampler;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.compare.EngineFailure;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.function.Supplier;

/**
 * Checks that need no reference: the same tokens computed along different paths must agree to fp32 noise.
 * decode vs one-pass prefill; chunked prefill vs one pass; instrumented vs plain (bit-identical logits);
 * positions processed per decode step (must be 1). A disagreement is localized to the first (position, point).
 */
public final class SelfCheck {
    private final Gemma4Model model;
    private final EngineOptions options;

    public SelfCheck(Gemma4Model model, EngineOptions options) {
        this.model = model;
        this.options = options.withProbe(null);
    }

    /** The prompt length of {@link #defaultTokens()}: longer than the sliding window. */
    public int defaultPromptLength() { return Math.min(2 * model.config().slidingWindow() + 3, 64); }

    /** A prompt longer than the sliding window, then greedy decode steps past a ring wrap. */
    public int[] defaultTokens() {
        int window = model.config().slidingWindow();
        int vocab = model.config().vocabSize();
        int promptLength = defaultPromptLength();
        var prompt = new int[promptLength];
        prompt[0] = Math.min(2, vocab - 1);
        for (int i = 1; i < promptLength; i++) prompt[i] = 4 + (int) ((i * 7919L) % Math.max(1, vocab - 4));
        int decodeSteps = Math.min(window + 4, 40);
        var all = Arrays.copyOf(prompt, promptLength + decodeSteps);
        int s = 0;
        try {
            var session = model.newSession(options);
            var logits = session.forward(prompt);
            for (; s < decodeSteps; s++) {
                int next = Sampler.argmax(logits);
                all[promptLength + s] = next;
                if (s + 1 < decodeSteps) logits = session.forward(new int[]{next});
            }
        } catch (BadInputException e) {
            throw e;
        } catch (RuntimeException e) {
            // An engine that throws while decoding still gets checked (each check then reports the exception):
            // the tokens it could not choose continue the prompt's pattern.
            for (int i = promptLength + s; i < all.length; i++) all[i] = 4 + (int) ((i * 7919L) % Math.max(1, vocab - 4));
        }
        return all;
    }

    public List<SelfCheckResult> runAll(int[] tokens, int promptLength) {
        return plan(tokens, promptLength, false).stream().map(Supplier::get).toList();
    }

    /** Every reference-free check on these tokens: {@link #runAll} and the cache-policy scenarios of {@link PolicyChecks}. */
    public List<SelfCheckResult> runEverything(int[] tokens, int promptLength) {
        return plan(tokens, promptLength, true).stream().map(Supplier::get).toList();
    }

    /** The first check of {@link #runEverything} that fails, without running the ones after it; empty when all pass. */
    public Optional<SelfCheckResult> firstFailure(int[] tokens, int promptLength) {
        for (var check : plan(tokens, promptLength, true)) {
            var r = check.get();
            if (!r.passed()) return Optional.of(r);
        }
        return Optional.empty();
    }

    private List<Supplier<SelfCheckResult>> plan(int[] tokens, int promptLength, boolean policies) {
        var out = new ArrayList<Supplier<SelfCheckResult>>();
        out.add(guarded("decode-vs-prefill", () -> decodeVsPrefill(tokens, promptLength)));
        int window = model.config().slidingWindow();
        for (int chunk : new int[]{1, 3, Math.max(1, window - 1), window + 1})
            out.add(guarded("chunked-prefill-" + chunk, () -> chunkedVsOnePass(tokens, chunk)));
        out.add(guarded("cache-reads-match-writes", () -> cacheReadsMatchWrites(tokens, promptLength)));
        out.add(guarded("instrumented-vs-plain", () -> instrumentedVsPlain(tokens, promptLength)));
        out.add(guarded("positions-per-decode-step", () -> positionsPerDecodeStep(tokens, promptLength)));
        if (policies) {
            var p = new PolicyChecks(model, options);
            out.add(guarded("prefix-reuse", () -> p.prefixReuse(tokens, promptLength)));
            out.add(guarded("multi-turn-session", () -> p.multiTurnSession(tokens, promptLength)));
            out.add(guarded("snapshot-restore", () -> p.snapshotRestore(tokens, promptLength)));
            out.add(guarded("truncate-sliding", () -> p.truncateToSharedPrefix(tokens, promptLength)));
            out.add(guarded("naive-trim-diverges", () -> p.naiveTrim(tokens, promptLength)));
        }
        return out;
    }

    /** The check, or — when the engine under test throws while running it — a failure of the check that says so. */
    private static Supplier<SelfCheckResult> guarded(String check, Supplier<SelfCheckResult> run) {
        return () -> {
            try {
                return run.get();
            } catch (BadInputException e) {
                throw e;
            } catch (RuntimeException e) {
                var f = EngineFailure.of(0, e);
                String detail = "the engine threw: " + f.what() + (f.frames().isEmpty() ? "" : " (at " + f.frames().getFirst() + ")");
                return new SelfCheckResult(check, "the engine ran this check to the end", false, null, null, Double.NaN, 0, detail);
            }
        };
    }

    /** The one-pass recording of the last tokens asked for: every comparison against one pass shares it. */
    private int[] onePassTokens;
    private RowRecorder onePass;

    private RowRecorder onePass(int[] tokens) {
        if (onePass == null || !Arrays.equals(onePassTokens, tokens)) {
            onePass = record(tokens, new int[]{tokens.length});
            onePassTokens = tokens.clone();
        }
        return onePass;
    }

    private RowRecorder record(int[] tokens, int[] splits) {
        var rec = new RowRecorder();
        var session = model.newSession(options.withProbe(rec));
        int pos = 0;
        for (int len : splits) {
            session.forward(Arrays.copyOfRange(tokens, pos, pos + len));
            pos += len;
        }
        return rec;
    }

    public SelfCheckResult decodeVsPrefill(int[] tokens, int promptLength) {
        var splits = Agreement.decodeSplits(tokens.length, promptLength);
        var decode = record(tokens, splits);
        return Agreement.firstDisagreement("decode-vs-prefill",
                "prompt prefill + one-token decode steps vs one pass over all " + tokens.length + " tokens", onePass(tokens), decode);
    }

    public SelfCheckResult chunkedVsOnePass(int[] tokens, int chunk) {
        var splits = new ArrayList<Integer>();
        for (int p = 0; p < tokens.length; p += chunk) splits.add(Math.min(chunk, tokens.length - p));
        var chunked = record(tokens, splits.stream().mapToInt(Integer::intValue).toArray());
        return Agreement.firstDisagreement("chunked-prefill-" + chunk, "prefill in chunks of " + chunk + " vs one pass", onePass(tokens), chunked);
    }

    /**
     * Prompt then one-token decode steps: every read window must span the positions its layer may see and hold the
     * keys and values that entered the cache there (see {@link CacheAudit}).
     */
    public SelfCheckResult cacheReadsMatchWrites(int[] tokens, int promptLength) {
        var audit = new CacheAudit(model.config(), Agreement.TOLERANCE);
        var session = model.newSession(options.withProbe(audit));
        session.forward(Arrays.copyOf(tokens, promptLength));
        for (int p = promptLength; p < tokens.length; p++) session.forward(new int[]{tokens[p]});
        String d = "prompt-then-decode: every read window spans its layer's positions and holds the keys/values that entered the cache there";
        if (audit.first == null) return SelfCheckResult.pass("cache-reads-match-writes", d, audit.reads + " read windows hold what entered the cache");
        var v = audit.first;
        return new SelfCheckResult("cache-reads-match-writes", d, false, v.position(), v.point(), v.relL2(), Agreement.TOLERANCE,
                Fmt.format("%d of %d read windows are wrong; first at step %d, %s: %s", audit.violations, audit.reads, v.step(), v.point(), v.detail()));
    }

    public SelfCheckResult instrumentedVsPlain(int[] tokens, int promptLength) {
        Probe everything = (point, shape, data) -> null;
        var plain = model.newSession(options);
        var probed = model.newSession(options.withProbe(everything));
        int pos = 0;
        int step = 0;
        while (pos < tokens.length) {
            int len = step == 0 ? promptLength : 1;
            var chunk = Arrays.copyOfRange(tokens, pos, pos + len);
            float[] a = plain.forward(chunk), b = probed.forward(chunk);
            if (!Arrays.equals(a, b)) {
                return new SelfCheckResult("instrumented-vs-plain", "logits with every probe attached vs none (bit-identical)",
                        false, pos + len - 1, CapturePoints.LOGITS, CellStats.relL2(b, a), 0, "attaching probes changed the logits at step " + step);
            }
            pos += len;
            step++;
        }
        return SelfCheckResult.pass("instrumented-vs-plain", "logits with every probe attached vs none (bit-identical)",
                step + " steps bit-identical");
    }

    public SelfCheckResult positionsPerDecodeStep(int[] tokens, int promptLength) {
        var session = model.newSession(options);
        session.forward(Arrays.copyOf(tokens, promptLength));
        long worst = 0;
        int worstStep = -1;
        for (int p = promptLength; p < tokens.length; p++) {
            long before = session.positionsProcessed();
            session.forward(new int[]{tokens[p]});
            long work = session.positionsProcessed() - before;
            if (work > worst) { worst = work; worstStep = p - promptLength + 1; }
        }
        String d = "prompt-then-decode: positions run through the layers per decode step";
        if (worst <= 1) return SelfCheckResult.pass("positions-per-decode-step", d, "every decode step processed exactly 1 position");
        return new SelfCheckResult("positions-per-decode-step", d, false, promptLength + worstStep - 1, null, worst, 1,
                "decode step " + worstStep + " processed " + worst + " positions (expected 1): the engine re-reads the sequence every step, so per-token cost grows with the context");
    }
}
