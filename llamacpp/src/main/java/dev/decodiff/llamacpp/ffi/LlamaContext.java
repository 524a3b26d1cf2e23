package dev.decodiff.llamacpp.ffi;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.Locale;

import static dev.decodiff.llamacpp.ffi.LlamaLayouts.offset;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BOOLEAN;

/**
 * A llama.cpp context (one sequence, its KV cache) on a loaded model: decode batches at given positions, read the
 * logits, clear the cache. With a {@link Tap} the graph's named tensors are offered to it as they are computed,
 * through llama.cpp's eval callback ({@code cb_eval}); without one it is a plain decode loop (for timing).
 */
public final class LlamaContext implements AutoCloseable {
    /** Receives graph tensors during {@link #decode}: asked first (before it is computed), then handed each one it wanted. */
    public interface Tap {
        boolean wants(GgmlTensor tensor);

        void take(GgmlTensor tensor);
    }

    /** {@code enum llama_flash_attn_type}: AUTO lets llama.cpp enable it where the device supports it (llama-bench's default). */
    public enum FlashAttention {
        OFF(0), ON(1), AUTO(-1);

        public final int value;

        FlashAttention(int value) { this.value = value; }
    }

    /** How llama.cpp splits a decode call into graphs and runs them. */
    public enum Scheduling {
        /**
         * A whole prompt in one ubatch and one cache cell per position (a full-size sliding-window cache), threads
         * started per graph: capture needs each named tensor once per step, the cells in position order.
         */
        WHOLE_PROMPT,
        /**
         * llama-bench's defaults, for timing: batches of {@value #BENCH_BATCH} tokens computed {@value #BENCH_UBATCH} at
         * a time, a sliding-window cache of the window only, and a threadpool of the context's own whose workers poll
         * (level {@value #BENCH_POLL}) for the next graph.
         */
        LLAMA_BENCH;

        public static final int BENCH_BATCH = 2048, BENCH_UBATCH = 512, BENCH_POLL = 50;
    }

    /** How the context is made. {@code typeK}/{@code typeV}: the KV-cache storage types ("f32", "f16", "bf16", "q8_0", "q4_0"). */
    public record Options(int contextLength, int threads, String typeK, String typeV, FlashAttention flashAttention, Scheduling scheduling) {
        public Options {
            if (contextLength < 1) throw new IllegalArgumentException("context length must be ≥ 1, got " + contextLength);
            if (threads < 1) throw new IllegalArgumentException("threads must be ≥ 1, got " + threads);
            ggmlType(typeK);
            ggmlType(typeV);
            java.util.Objects.requireNonNull(flashAttention);
            java.util.Objects.requireNonNull(scheduling);
        }

        /** Whole-prompt scheduling (what capture needs), flash attention on or off. */
        public Options(int contextLength, int threads, String typeK, String typeV, boolean flashAttention) {
            this(contextLength, threads, typeK, typeV, flashAttention ? FlashAttention.ON : FlashAttention.OFF, Scheduling.WHOLE_PROMPT);
        }

        /** F32 K/V cache, flash attention off, one thread: the exact configuration. */
        public static Options exact(int contextLength) { return new Options(contextLength, 1, "f32", "f32", false); }

        /** llama-bench's settings (flash attention auto, {@link Scheduling#LLAMA_BENCH}) with these K/V types and threads. */
        public static Options llamaBench(int contextLength, int threads, String typeK, String typeV) {
            return new Options(contextLength, threads, typeK, typeV, FlashAttention.AUTO, Scheduling.LLAMA_BENCH);
        }

        /** A context length with room for {@code tokens} positions (whole 256-cell pages, as llama.cpp pads). */
        public static int lengthFor(int tokens) { return Math.max(256, (tokens + 255) / 256 * 256); }

        /** Tokens per llama_decode call: a longer input is fed in batches of this many. */
        int batch() { return scheduling == Scheduling.LLAMA_BENCH ? Math.min(Scheduling.BENCH_BATCH, contextLength) : contextLength; }
    }

    /** A KV-cache type name as a ggml_type value. */
    public static int ggmlType(String name) {
        return switch (name.toLowerCase(Locale.ROOT)) {
            case "f32" -> GgmlTensor.F32;
            case "f16" -> GgmlTensor.F16;
            case "bf16" -> GgmlTensor.BF16;
            case "q8_0" -> GgmlTensor.Q8_0;
            case "q4_0" -> GgmlTensor.Q4_0;
            default -> throw new IllegalArgumentException("unknown KV-cache type '" + name + "' (f32, f16, bf16, q8_0, q4_0)");
        };
    }

    private final LlamaLibrary lib;
    private final LlamaModel model;
    private final Options options;
    private final Arena arena = Arena.ofShared();
    private final Tap tap;
    private final int vocab;
    private final LlamaThreadpool threadpool;
    private final boolean flashAttentionOn;
    private MemorySegment ctx;
    private Throwable tapFailure;

    /**
     * How a context batches and keeps sequences, set explicitly (cache scenarios): tokens per llama_decode call
     * ({@code nBatch}), per graph ({@code nUbatch}), how many sequences it holds, and whether its sliding-window cache
     * keeps every position ({@code swaFull}) or the window plus a ubatch only.
     */
    public record Layout(int nBatch, int nUbatch, int nSeqMax, boolean swaFull) {
        public Layout {
            if (nBatch < 1 || nUbatch < 1 || nUbatch > nBatch || nSeqMax < 1)
                throw new IllegalArgumentException("n_batch " + nBatch + ", n_ubatch " + nUbatch + ", n_seq_max " + nSeqMax + ": need 1 ≤ n_ubatch ≤ n_batch and n_seq_max ≥ 1");
        }
    }

    public LlamaContext(LlamaModel model, Options options, Tap tap) { this(model, options, null, tap); }

    /** A context with an explicit {@link Layout} (null: the one {@link Options#scheduling} implies). */
    public LlamaContext(LlamaModel model, Options options, Layout layout, Tap tap) {
        this.lib = model.library();
        this.model = model;
        this.options = options;
        this.tap = tap;
        this.vocab = model.vocabSize();
        try {
            var p = (MemorySegment) lib.contextDefaultParams.invokeExact((SegmentAllocator) arena);
            int n = options.contextLength();
            setInt(p, "n_ctx", n);
            boolean whole = options.scheduling() == Scheduling.WHOLE_PROMPT;
            setInt(p, "n_batch", layout != null ? layout.nBatch() : options.batch());
            // whole prompt: one ubatch, so each named tensor comes once per step
            setInt(p, "n_ubatch", layout != null ? layout.nUbatch() : whole ? n : Math.min(Scheduling.BENCH_UBATCH, n));
            setInt(p, "n_seq_max", layout != null ? layout.nSeqMax() : 1);
            setInt(p, "n_threads", options.threads());
            setInt(p, "n_threads_batch", options.threads());
            setInt(p, "flash_attn_type", options.flashAttention().value);
            setInt(p, "type_k", ggmlType(options.typeK()));
            setInt(p, "type_v", ggmlType(options.typeV()));
            // A full-size sliding-window cache keeps one cell per position, so the cells read are in position order.
            p.set(JAVA_BOOLEAN, offset(lib.layouts().contextParams(), "swa_full"), layout != null ? layout.swaFull() : whole);
            // several sequences in one unified buffer: llama_memory_seq_cp of part of a sequence needs it (per-sequence
            // streams copy whole buffers only)
            if (layout != null && layout.nSeqMax() > 1) p.set(JAVA_BOOLEAN, offset(lib.layouts().contextParams(), "kv_unified"), true);
            p.set(JAVA_BOOLEAN, offset(lib.layouts().contextParams(), "no_perf"), true);
            if (tap != null) {
                var target = MethodHandles.lookup().bind(this, "onEval",
                        MethodType.methodType(boolean.class, MemorySegment.class, boolean.class, MemorySegment.class));
                var stub = Linker.nativeLinker().upcallStub(target, FunctionDescriptor.of(JAVA_BOOLEAN, ADDRESS, JAVA_BOOLEAN, ADDRESS), arena);
                p.set(ADDRESS, offset(lib.layouts().contextParams(), "cb_eval"), stub);
            }
            lib.log().mark();
            ctx = (MemorySegment) lib.initFromModel.invokeExact(model.pointer(), p);
        } catch (Throwable t) {
            arena.close();
            throw new LlamaCppException("llama_init_from_model failed on " + model.file() + ": " + t, t);
        }
        if (ctx.equals(MemorySegment.NULL)) {
            arena.close();
            String why = lib.log().errorsSinceMark();
            throw new LlamaCppException("llama.cpp " + LlamaCppHome.RELEASE + " refused a context for " + model.file() + " with "
                    + describe(options) + (why.isEmpty() ? "" : ": " + why));
        }
        // llama.cpp logs how it resolved "auto" while it reserves the graphs, inside llama_init_from_model
        flashAttentionOn = switch (options.flashAttention()) {
            case ON -> true;
            case OFF -> false;
            case AUTO -> lib.log().resolvedSinceMark("Flash Attention enabled") != null;
        };
        LlamaThreadpool pool = null;
        if (options.scheduling() == Scheduling.LLAMA_BENCH) {
            try {
                pool = LlamaThreadpool.start(lib, options.threads(), Scheduling.BENCH_POLL);
                pool.attachTo(ctx);
            } catch (RuntimeException e) {
                close();
                if (pool != null) pool.close();
                throw e;
            }
        }
        threadpool = pool;
    }

    public static String describe(Options o) {
        return "K/V cache " + o.typeK() + "/" + o.typeV() + ", flash attention " + o.flashAttention().name().toLowerCase(Locale.ROOT)
                + ", " + o.threads() + " thread" + (o.threads() == 1 ? "" : "s")
                + (o.scheduling() == Scheduling.LLAMA_BENCH ? ", llama-bench's batching and threadpool" : "");
    }

    /** Whether attention runs as flash attention: as set, or as llama.cpp resolved {@link FlashAttention#AUTO} for this device. */
    public boolean flashAttentionOn() { return flashAttentionOn; }

    private void setInt(MemorySegment p, String field, int value) {
        p.set(ValueLayout.JAVA_INT, offset(lib.layouts().contextParams(), field), value);
    }

    public Options options() { return options; }

    public LlamaModel model() { return model; }

    /** The eval callback: {@code bool (*)(struct ggml_tensor *, bool ask, void *)}. Never lets an exception reach C. */
    boolean onEval(MemorySegment tensor, boolean ask, MemorySegment userData) {
        if (tapFailure != null) return false;
        try {
            var t = new GgmlTensor(lib, tensor);
            if (ask) return tap.wants(t);
            tap.take(t);
            return true;
        } catch (Throwable e) {
            tapFailure = e;
            return false;
        }
    }

    /**
     * Decodes {@code tokens} at positions start… of sequence 0 and returns the last position's logits. With
     * {@code allOutputs} every position is an output (so the final norm of every row is computed); without, only the
     * last position is (llama.cpp then takes the LM head of that row alone). Input longer than the context's batch
     * is fed in batches, as llama-bench feeds a prompt.
     */
    public float[] decode(int[] tokens, int start, boolean allOutputs) {
        if (ctx == null) throw new IllegalStateException("context is closed");
        if (tokens.length == 0) throw new IllegalArgumentException("no tokens to decode");
        if (start < 0 || start + tokens.length > options.contextLength())
            throw new IllegalArgumentException("positions " + start + "…" + (start + tokens.length - 1) + " do not fit a context of "
                    + options.contextLength());
        for (int t : tokens)
            if (t < 0 || t >= vocab)
                throw new IllegalArgumentException("token id " + t + " is outside the model's vocabulary of " + vocab);
        int batch = options.batch();
        for (int from = 0; from < tokens.length; from += batch)
            decodeBatch(tokens, from, Math.min(tokens.length, from + batch), start, allOutputs);
        return lastLogits(start + tokens.length - 1);
    }

    /** One llama_decode of tokens[from, to) at positions start+from…; the last token of all is always an output. */
    private void decodeBatch(int[] tokens, int from, int to, int start, boolean allOutputs) {
        int n = to - from;
        try (var a = Arena.ofConfined()) {
            var tok = a.allocate(ValueLayout.JAVA_INT, n);
            var pos = a.allocate(ValueLayout.JAVA_INT, n);
            var nSeq = a.allocate(ValueLayout.JAVA_INT, n);
            var seqIds = a.allocate(ADDRESS, n);
            var seq0 = a.allocate(ValueLayout.JAVA_INT);
            var out = a.allocate(ValueLayout.JAVA_BYTE, n);
            for (int i = 0; i < n; i++) {
                tok.setAtIndex(ValueLayout.JAVA_INT, i, tokens[from + i]);
                pos.setAtIndex(ValueLayout.JAVA_INT, i, start + from + i);
                nSeq.setAtIndex(ValueLayout.JAVA_INT, i, 1);
                seqIds.setAtIndex(ADDRESS, i, seq0);
                out.set(ValueLayout.JAVA_BYTE, i, (byte) (allOutputs || from + i == tokens.length - 1 ? 1 : 0));
            }
            var batch = batch(a, n, tok, pos, nSeq, seqIds, out);
            tapFailure = null;
            lib.log().mark();
            int rc = (int) lib.decode.invokeExact(ctx, batch);
            if (tapFailure != null) {
                if (tapFailure instanceof RuntimeException re) throw re;
                throw new LlamaCppException("reading llama.cpp's tensors failed: " + tapFailure, tapFailure);
            }
            if (rc != 0) {
                String why = lib.log().errorsSinceMark();
                throw new LlamaCppException("llama_decode returned " + rc + " for positions " + (start + from) + "…" + (start + to - 1)
                        + (why.isEmpty() ? "" : ": " + why));
            }
        } catch (LlamaCppException | IllegalArgumentException e) {
            throw e;
        } catch (Throwable t) {
            throw new LlamaCppException("llama_decode failed: " + t, t);
        }
    }

    /** A llama_batch of n tokens over the given arrays (no embeddings), allocated in a. */
    private MemorySegment batch(Arena a, int n, MemorySegment tok, MemorySegment pos, MemorySegment nSeq, MemorySegment seqIds, MemorySegment out) {
        var batchLayout = lib.layouts().batch();
        var batch = a.allocate(batchLayout);
        batch.set(ValueLayout.JAVA_INT, offset(batchLayout, "n_tokens"), n);
        batch.set(ADDRESS, offset(batchLayout, "token"), tok);
        batch.set(ADDRESS, offset(batchLayout, "embd"), MemorySegment.NULL);
        batch.set(ADDRESS, offset(batchLayout, "pos"), pos);
        batch.set(ADDRESS, offset(batchLayout, "n_seq_id"), nSeq);
        batch.set(ADDRESS, offset(batchLayout, "seq_id"), seqIds);
        batch.set(ADDRESS, offset(batchLayout, "logits"), out);
        return batch;
    }

        private float[] lastLogits(int position) {
        try {
            var logits = (MemorySegment) lib.logitsIth.invokeExact(ctx, -1);
            if (logits.equals(MemorySegment.NULL)) throw new LlamaCppException("llama.cpp returned no logits for position " + position);
            return logits.reinterpret((long) vocab * 4).toArray(ValueLayout.JAVA_FLOAT);
        } catch (LlamaCppException e) {
            throw e;
        } catch (Throwable t) {
            throw new LlamaCppException("llama_get_logits_ith failed: " + t, t);
        }
    }

    /**
     * One llama_decode of an explicit batch — token i at position {@code pos[i]} of sequence {@code seq[i]}, an output
     * where {@code outputs[i]} — split by llama.cpp into ubatches of the context's n_ubatch. Returns llama_decode's code
     * (0 done; 1 no room in the KV cache; below 0 an error) rather than throwing, so that a caller can tell a refusal.
     */
    public int decode(int[] tokens, int[] pos, int[] seq, boolean[] outputs) {
        if (ctx == null) throw new IllegalStateException("context is closed");
        int n = tokens.length;
        try (var a = Arena.ofConfined()) {
            var tok = a.allocate(ValueLayout.JAVA_INT, n);
            var ps = a.allocate(ValueLayout.JAVA_INT, n);
            var nSeq = a.allocate(ValueLayout.JAVA_INT, n);
            var seqIds = a.allocate(ADDRESS, n);
            var ids = a.allocate(ValueLayout.JAVA_INT, n);
            var out = a.allocate(ValueLayout.JAVA_BYTE, n);
            for (int i = 0; i < n; i++) {
                tok.setAtIndex(ValueLayout.JAVA_INT, i, tokens[i]);
                ps.setAtIndex(ValueLayout.JAVA_INT, i, pos[i]);
                nSeq.setAtIndex(ValueLayout.JAVA_INT, i, 1);
                ids.setAtIndex(ValueLayout.JAVA_INT, i, seq[i]);
                seqIds.setAtIndex(ADDRESS, i, ids.asSlice(4L * i, 4));
                out.set(ValueLayout.JAVA_BYTE, i, (byte) (outputs[i] ? 1 : 0));
            }
            var batch = batch(a, n, tok, ps, nSeq, seqIds, out);
            tapFailure = null;
            lib.log().mark();
            int rc = (int) lib.decode.invokeExact(ctx, batch);
            if (tapFailure != null) throw new LlamaCppException("reading llama.cpp's tensors failed: " + tapFailure, tapFailure);
            return rc;
        } catch (LlamaCppException e) {
            throw e;
        } catch (Throwable t) {
            throw new LlamaCppException("llama_decode failed: " + t, t);
        }
    }

    /** The logits of the i-th token of the last batch (it must have been an output). */
    public float[] logitsAt(int i) {
        try {
            var logits = (MemorySegment) lib.logitsIth.invokeExact(ctx, i);
            if (logits.equals(MemorySegment.NULL)) throw new LlamaCppException("llama.cpp returned no logits for batch row " + i);
            return logits.reinterpret((long) vocab * 4).toArray(ValueLayout.JAVA_FLOAT);
        } catch (LlamaCppException e) {
            throw e;
        } catch (Throwable t) {
            throw new LlamaCppException("llama_get_logits_ith failed: " + t, t);
        }
    }

    private MemorySegment memory() throws Throwable { return (MemorySegment) lib.getMemory.invokeExact(ctx); }

    /** llama_memory_seq_rm: drops positions [p0, p1) of a sequence (p1 &lt; 0: to the end); false if llama.cpp cannot. */
    public boolean seqRm(int seq, int p0, int p1) {
        try {
            return (boolean) lib.memorySeqRm.invokeExact(memory(), seq, p0, p1);
        } catch (Throwable t) {
            throw new LlamaCppException("llama_memory_seq_rm failed: " + t, t);
        }
    }

    /** llama_memory_seq_cp: sequence dst also holds src's positions [p0, p1). */
    public void seqCp(int src, int dst, int p0, int p1) {
        try {
            lib.memorySeqCp.invokeExact(memory(), src, dst, p0, p1);
        } catch (Throwable t) {
            throw new LlamaCppException("llama_memory_seq_cp failed: " + t, t);
        }
    }

    /** llama_memory_seq_add: shifts positions [p0, p1) of a sequence by delta (a context shift; keys are re-rotated). */
    public void seqAdd(int seq, int p0, int p1, int delta) {
        try {
            lib.memorySeqAdd.invokeExact(memory(), seq, p0, p1, delta);
        } catch (Throwable t) {
            throw new LlamaCppException("llama_memory_seq_add failed: " + t, t);
        }
    }

    /** llama_memory_can_shift: whether this context's memory takes llama_memory_seq_add (it aborts the process on the next decode otherwise). */
    public boolean canShift() {
        try {
            return (boolean) lib.memoryCanShift.invokeExact(memory());
        } catch (Throwable t) {
            throw new LlamaCppException("llama_memory_can_shift failed: " + t, t);
        }
    }

    /** llama_memory_seq_pos_min / _max of a sequence (-1 when empty). */
    public int seqPosMin(int seq) {
        try {
            return (int) lib.memorySeqPosMin.invokeExact(memory(), seq);
        } catch (Throwable t) {
            throw new LlamaCppException("llama_memory_seq_pos_min failed: " + t, t);
        }
    }

    public int seqPosMax(int seq) {
        try {
            return (int) lib.memorySeqPosMax.invokeExact(memory(), seq);
        } catch (Throwable t) {
            throw new LlamaCppException("llama_memory_seq_pos_max failed: " + t, t);
        }
    }

    /** llama_state_seq_get_data: the sequence's cache state as bytes (a snapshot). */
    public byte[] stateSeqGet(int seq) {
        try (var a = Arena.ofConfined()) {
            long n = (long) lib.stateSeqGetSize.invokeExact(ctx, seq);
            var buf = a.allocate(Math.max(1, n));
            long got = (long) lib.stateSeqGetData.invokeExact(ctx, buf, n, seq);
            return buf.asSlice(0, got).toArray(ValueLayout.JAVA_BYTE);
        } catch (Throwable t) {
            throw new LlamaCppException("llama_state_seq_get_data failed: " + t, t);
        }
    }

    /** llama_state_seq_set_data into a sequence (emptied first); false when llama.cpp could not load it. */
    public boolean stateSeqSet(int seq, byte[] state) {
        try (var a = Arena.ofConfined()) {
            seqRm(seq, -1, -1);
            var buf = a.allocateFrom(ValueLayout.JAVA_BYTE, state);
            return (long) lib.stateSeqSetData.invokeExact(ctx, buf, (long) state.length, seq) > 0;
        } catch (Throwable t) {
            throw new LlamaCppException("llama_state_seq_set_data failed: " + t, t);
        }
    }

    /** Empties the KV cache (the next decode starts at position 0 again). */
    public void clear() {
        try {
            var mem = (MemorySegment) lib.getMemory.invokeExact(ctx);
            lib.memoryClear.invokeExact(mem, true);
        } catch (Throwable t) {
            throw new LlamaCppException("llama_memory_clear failed: " + t, t);
        }
    }

    /** Drops positions ≥ {@code from} of the sequence from the KV cache; false if llama.cpp cannot cut there. */
    public boolean truncate(int from) {
        try {
            var mem = (MemorySegment) lib.getMemory.invokeExact(ctx);
            return (boolean) lib.memorySeqRm.invokeExact(mem, 0, from, -1);
        } catch (Throwable t) {
            throw new LlamaCppException("llama_memory_seq_rm failed: " + t, t);
        }
    }

    @Override
    public void close() {
        if (ctx == null) return;
        try {
            lib.free.invokeExact(ctx);
        } catch (Throwable t) {
            throw new LlamaCppException("llama_free failed: " + t, t);
        } finally {
            ctx = null;
            arena.close();
            if (threadpool != null) threadpool.close(); // after the context that computed on it
        }
    }
}
