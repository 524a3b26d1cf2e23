package dev.decodiff.harness.selfcheck;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.Probe;
import dev.decodiff.engine.Sampler;
import dev.decodiff.harness.compare.CellStats;
import dev.decodiff.llamacpp.LlamaCppRunner;
import dev.decodiff.llamacpp.ffi.LlamaContext;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Supplier;

/**
 * The reference-free checks on llama.cpp (a GGUF run live through its C API): the same tokens computed along different
 * paths — one pass, the prompt then one-token decode steps, chunked prefill — must agree cell by cell, and attaching
 * the capture must leave the logits bit-identical. Each path captures every per-position point from llama.cpp's graph
 * (as compare does) and the rows are lined up by position ({@link RowRecorder}). What separates two paths in llama.cpp
 * is the summation order of differently batched products (a one-token step multiplies row by row, a batch through its
 * GEMM): fp32 noise that its fp16 GELU table turns, where an input sits next to an fp16 rounding boundary, into a flip
 * of one fp16 step of that GELU output. So the tolerance here is {@link #TOLERANCE}, 2^-10 (one fp16 step at most,
 * over a whole row), not {@link Agreement#TOLERANCE}: on the bundled checkpoints clean llama.cpp's worst
 * decode-vs-prefill cell is 3.0e-4 (gemma4-tiny) and 4.4e-4 (gemma4-tiny-moe), chunked prefill at most 2e-5, while a
 * decode-only bug is two orders above (porting bug 09: 0.13 at layers.2.attn.q).
 *
 * <p>On Qwen3.5 ({@link #qwen35}) the checks are about handing the conv and recurrent states over, as in
 * {@link RecurrentSelfCheck}: every state a step reads is, bit for bit, the one the step before wrote
 * ({@link StateAudit}); the prompt then one-token steps, every token its own step, the prompt in separate calls of 3
 * and 65 tokens, and the whole sequence in one call that llama.cpp itself splits into ubatches of 3 and of 65 (n_ubatch
 * smaller than the prompt; 65 crosses the delta rule's 64-token chunk boundary inside a ubatch) must each agree with
 * one pass over all tokens.
 *
 * <p>On the Llama family ({@link #dense}: full attention, no sliding window, no recurrent state) the paths are Gemma
 * 4's without the window: decode vs prefill, chunked prefill in chunks of 3 and 7, capture vs none.
 */
public final class LlamaCppSelfCheck {
    /** 2^-10: one fp16 step of the GELU table's output, the coarsest rounding on llama.cpp's fp32 path. */
    public static final double TOLERANCE = 0x1p-10;

    /** Qwen3.5's prompt: past the delta rule's first 64-token chunk (as {@link RecurrentSelfCheck}), then decode steps. */
    public static final int QWEN35_PROMPT = 70, QWEN35_DECODE = 8;
    /** A dense model's prompt and decode steps: enough positions for chunks of 3 and 7 to cut the prompt unevenly. */
    public static final int DENSE_PROMPT = 24, DENSE_DECODE = 8;

    private final Path gguf;
    private final LlamaContext.Options options;
    /** The model's sliding window (Gemma 4's); 0 for a model with recurrent states instead (Qwen3.5). */
    private final int window;
    private final int vocab;
    /** A full-attention model without recurrent states (the Llama family): window 0 does not mean Qwen3.5 then. */
    private final boolean dense;

    /** The checks of a sliding-window model's GGUF (Gemma 4): decode vs prefill, chunked prefill, capture vs none. */
    public LlamaCppSelfCheck(Path gguf, LlamaContext.Options options, int slidingWindow, int vocab) {
        this(gguf, options, slidingWindow, vocab, false);
    }

    private LlamaCppSelfCheck(Path gguf, LlamaContext.Options options, int slidingWindow, int vocab, boolean dense) {
        this.gguf = gguf;
        this.options = options;
        this.window = slidingWindow;
        this.vocab = vocab;
        this.dense = dense;
    }

    /** The checks of a full-attention model's GGUF (the Llama family, vocabulary {@code vocab}): decode vs prefill, chunked prefill, capture vs none. */
    public static LlamaCppSelfCheck dense(Path gguf, LlamaContext.Options options, int vocab) {
        return new LlamaCppSelfCheck(gguf, options, 0, vocab, true);
    }

    /** The checks of a Qwen3.5 GGUF (vocabulary {@code vocab}): state hand-over along every split llama.cpp offers. */
    public static LlamaCppSelfCheck qwen35(Path gguf, LlamaContext.Options options, int vocab) {
        return new LlamaCppSelfCheck(gguf, options, 0, vocab);
    }

    public int promptLength() { return dense ? DENSE_PROMPT : window == 0 ? QWEN35_PROMPT : defaultPromptLength(window); }

    public int tokenCount() { return dense ? DENSE_PROMPT + DENSE_DECODE : window == 0 ? QWEN35_PROMPT + QWEN35_DECODE : defaultTokenCount(window); }

    /** As Gemma 4's {@code SelfCheck.defaultPromptLength()}: longer than the sliding window. */
    public static int defaultPromptLength(int slidingWindow) { return Math.min(2 * slidingWindow + 3, 64); }

    /** The total tokens of {@link #defaultTokens()}: the prompt, then greedy steps past the window. */
    public static int defaultTokenCount(int slidingWindow) { return defaultPromptLength(slidingWindow) + Math.min(slidingWindow + 4, 40); }

    /** SelfCheck's prompt pattern, continued by llama.cpp's own greedy choices. */
    public int[] defaultTokens() {
        int prompt = promptLength();
        int[] all = new int[tokenCount()];
        all[0] = Math.min(2, vocab - 1);
        for (int i = 1; i < prompt; i++) all[i] = 4 + (int) ((i * 7919L) % Math.max(1, vocab - 4));
        try (var r = LlamaCppRunner.open(gguf, options, null)) {
            float[] logits = r.decode(Arrays.copyOf(all, prompt), 0);
            for (int p = prompt; p < all.length; p++) {
                all[p] = Sampler.argmax(logits);
                if (p + 1 < all.length) logits = r.decode(new int[]{all[p]}, p);
            }
        }
        return all;
    }

    public List<SelfCheckResult> runAll(int[] tokens, int promptLength) {
        if (window == 0 && !dense) return runRecurrent(tokens, promptLength);
        var plan = new ArrayList<Supplier<SelfCheckResult>>();
        plan.add(() -> decodeVsPrefill(tokens, promptLength));
        int[] chunks = dense ? new int[]{3, 7} : new int[]{3, Math.max(2, window - 1), window + 1};
        for (int chunk : chunks) plan.add(() -> chunkedVsOnePass(tokens, chunk));
        plan.add(() -> instrumentedVsPlain(tokens, promptLength));
        return plan.stream().map(Supplier::get).toList();
    }

    private RowRecorder onePass;

    private RowRecorder onePass(int[] tokens) {
        if (onePass == null) onePass = record(tokens, new int[]{tokens.length});
        return onePass;
    }

    /** Every per-position point of llama.cpp's graph, the tokens fed in steps of {@code splits}. */
    private RowRecorder record(int[] tokens, int[] splits) { return record(tokens, splits, null, new RowRecorder()); }

    /** The tokens fed in steps of {@code splits}, each step's captures handed to {@code probe}; {@code layout}: null for one ubatch per step. */
    private <P extends Probe> P record(int[] tokens, int[] splits, LlamaContext.Layout layout, P probe) {
        try (var r = LlamaCppRunner.open(gguf, options, layout, probe::wants)) {
            int pos = 0, step = 0;
            for (int len : splits) {
                var s = r.step(Arrays.copyOfRange(tokens, pos, pos + len), pos, List.of());
                probe.beginStep(step++, pos, len);
                for (var c : s.tensors().values()) probe.capture(c.point(), c.shape(), c.data());
                pos += len;
            }
        }
        return probe;
    }

    /**
     * Qwen3.5's checks, each against one pass over all tokens (one ubatch): the state audit first, since a state
     * handed over wrong is named there, at the read, before anything computed from it.
     */
    private List<SelfCheckResult> runRecurrent(int[] tokens, int promptLength) {
        var plan = new ArrayList<Supplier<SelfCheckResult>>();
        plan.add(() -> stateReadsMatchWrites(tokens, promptLength));
        plan.add(() -> decodeVsPrefill(tokens, promptLength));
        plan.add(() -> Agreement.firstDisagreement("one-token-steps", "every token its own step vs one pass over all " + tokens.length + " tokens",
                onePass(tokens), record(tokens, RecurrentSelfCheck.chunks(tokens.length, 1)), TOLERANCE));
        for (int chunk : new int[]{3, 65}) plan.add(() -> chunkedVsOnePass(tokens, chunk));
        for (int ubatch : new int[]{3, 65}) plan.add(() -> ubatchedVsOnePass(tokens, ubatch));
        plan.add(() -> instrumentedVsPlain(tokens, promptLength));
        return plan.stream().map(Supplier::get).toList();
    }

    /** All tokens in one llama_decode call that llama.cpp splits into ubatches of {@code ubatch} (one graph each). */
    public SelfCheckResult ubatchedVsOnePass(int[] tokens, int ubatch) {
        var layout = new LlamaContext.Layout(options.contextLength(), ubatch, 1, true);
        return Agreement.firstDisagreement("ubatch-" + ubatch, "all " + tokens.length + " tokens in one call, computed by llama.cpp in ubatches of "
                + ubatch + " (n_ubatch), vs one pass", onePass(tokens), record(tokens, new int[]{tokens.length}, layout, new RowRecorder()), TOLERANCE);
    }

    /**
     * Every conv and recurrent state a step reads is the one the step before wrote, bit for bit, along three splits:
     * one-token steps, the prompt then one-token steps, calls of 3 tokens.
     */
    public SelfCheckResult stateReadsMatchWrites(int[] tokens, int promptLength) {
        String c = "state-reads-match-writes", d = "each step reads the conv and recurrent states the step before wrote (bit-identical)";
        int reads = 0;
        for (int[] splits : List.of(RecurrentSelfCheck.chunks(tokens.length, 1), Agreement.decodeSplits(tokens.length, promptLength),
                RecurrentSelfCheck.chunks(tokens.length, 3))) {
            var audit = record(tokens, splits, null, new StateAudit());
            reads += audit.reads;
            if (audit.first != null) {
                var v = audit.first;
                return new SelfCheckResult(c, d, false, v.position(), v.point(), v.relL2(), 0, dev.decodiff.harness.report.Fmt.format(
                        "%d of %d state reads are not what the step before wrote; first at step %d (steps of %s), position %d, %s (rel L2 %.3g)",
                        audit.violations, audit.reads, v.step(), splits.length == tokens.length ? "1 token" : splits[0] == promptLength
                                ? "prompt then 1 token" : "3 tokens", v.position(), v.point(), v.relL2()));
            }
        }
        return SelfCheckResult.pass(c, d, reads + " state reads equal the state written the step before");
    }

    public SelfCheckResult decodeVsPrefill(int[] tokens, int promptLength) {
        var splits = Agreement.decodeSplits(tokens.length, promptLength);
        return Agreement.firstDisagreement("decode-vs-prefill",
                "prompt prefill + one-token decode steps vs one pass over all " + tokens.length + " tokens", onePass(tokens), record(tokens, splits), TOLERANCE);
    }

    public SelfCheckResult chunkedVsOnePass(int[] tokens, int chunk) {
        var splits = new ArrayList<Integer>();
        for (int p = 0; p < tokens.length; p += chunk) splits.add(Math.min(chunk, tokens.length - p));
        return Agreement.firstDisagreement("chunked-prefill-" + chunk, "prefill in chunks of " + chunk + " vs one pass", onePass(tokens),
                record(tokens, splits.stream().mapToInt(Integer::intValue).toArray()), TOLERANCE);
    }

    /** The capture's observer effect: the logits of a context with every point captured against one without a callback. */
    public SelfCheckResult instrumentedVsPlain(int[] tokens, int promptLength) {
        String d = "logits with every point captured from llama.cpp's graph vs no eval callback (bit-identical)";
        try (var plain = LlamaCppRunner.open(gguf, options, null); var probed = LlamaCppRunner.open(gguf, options, p -> true)) {
            int pos = 0, step = 0;
            while (pos < tokens.length) {
                int len = step == 0 ? promptLength : 1;
                var chunk = Arrays.copyOfRange(tokens, pos, pos + len);
                float[] a = plain.decodeAllOutputs(chunk, pos), b = probed.step(chunk, pos, List.of()).logits();
                if (!Arrays.equals(a, b))
                    return new SelfCheckResult("instrumented-vs-plain", d, false, pos + len - 1, CapturePoints.LOGITS, CellStats.relL2(b, a), 0,
                            "capturing changed the logits at step " + step);
                pos += len;
                step++;
            }
            return SelfCheckResult.pass("instrumented-vs-plain", d, step + " steps bit-identical");
        }
    }
}
