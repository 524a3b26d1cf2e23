package dev.decodiff.engine;

import dev.decodiff.metal.MatmulPrecision;
import dev.decodiff.metal.PackedRows;
import dev.decodiff.metal.Parallel;
import dev.decodiff.metal.Transcendentals;
import dev.decodiff.metal.VectorMath;
import dev.decodiff.metal.WeightMatrix;

import java.util.Arrays;

/**
 * One decoding conversation over a {@link Gemma4Model}: the KV caches and the position. {@link #forward} feeds
 * any number of tokens in one pass (prefill) or one at a time (decode), following transformers' Gemma 4 decoder
 * layer top to bottom. Probes, when attached, see every capture point of docs/dump-format.md.
 */
public final class InferenceSession {
    private final Gemma4Model model;
    private final Gemma4Config cfg;
    private final ModelWeights w;
    private final EngineOptions options;
    private final LayerCache[] caches;
    private final String[][] names;
    private Probe probe;
    private int position;
    private int step;
    private long positionsProcessed;
    private int[] history = new int[64];

    private final FaultSwitches faults;
    /** The precision of every product with a bf16 weight matrix (exact fp32 unless --matmul bf16). */
    private final MatmulPrecision matmul;
    /** Attention reads encoded caches packed (the default) rather than decoding the history first: same bits, faster. */
    private final boolean packedAttention = !"false".equalsIgnoreCase(System.getProperty("decodiff.packedAttention"));
    // RoPE position minus cache position: non-zero only under fault prefix-reuse-stale-position after a restore.
    private int ropeShift;

    // This step's new keys and values per non-shared layer, committed to the caches after the last layer.
    private final float[][] stepK;
    private final float[][] stepV;

    // Working buffers reused by every layer and step (grown on demand): a step used to allocate a few hundred MB
    // of short-lived arrays in prefill, which the heap grew to hold. Probes still get private copies (capture).
    // A long prompt's arrays are large enough for G1 to place each in humongous regions, which only a collection
    // reclaims, and G1 grows the heap for a new one rather than collect: where little else is allocated, collections
    // come rarely and dead arrays pile up (a 4,096-token compare with less else allocated reached 4.5 GB of heap). So
    // the per-layer ones are slots here too.
    private static final int S_H = 0, S_A = 1, S_RES = 2, S_MLP = 3, S_G = 4, S_U = 5, S_Q = 6, S_ATT = 7, S_MLP_IN = 8, S_MLP_OUT = 9,
            S_PLE_GATE = 10, S_PLE_IN = 11, S_PLE_OUT = 12, S_READ_K = 13, S_READ_V = 14, SLOTS = 15;
    private final float[][] scratch = new float[SLOTS][];

    private float[] scratch(int slot, int n) {
        float[] b = scratch[slot];
        if (b == null || b.length < n) scratch[slot] = b = new float[n];
        return b;
    }

    InferenceSession(Gemma4Model model, EngineOptions options) {
        this.model = model;
        this.cfg = model.config();
        this.w = model.weights();
        this.options = options;
        this.probe = options.probe();
        this.matmul = options.matmul();
        this.faults = FaultSwitches.resolve(cfg, options);
        int L = cfg.numLayers();
        caches = new LayerCache[L];
        names = new String[L][];
        stepK = new float[L][];
        stepV = new float[L][];
        resetCaches();
        for (var spec : cfg.layers()) {
            int i = spec.index();
            names[i] = new String[CapturePoints.GEMMA4_LAYER_SUFFIXES.size()];
            for (int s = 0; s < names[i].length; s++) names[i][s] = CapturePoints.layer(i, CapturePoints.GEMMA4_LAYER_SUFFIXES.get(s));
        }
    }

    private void resetCaches() {
        for (var spec : cfg.layers()) caches[spec.index()] = spec.kvShared() ? null : newCache(spec);
    }

    /** An empty cache for a layer with its own keys and values, in the session's KV types (full ones grow on commit). */
    private LayerCache newCache(LayerSpec spec) {
        int stride = spec.kvHeads() * spec.headDim();
        return spec.type() == LayerType.SLIDING
                ? new SlidingLayerCache(stride, cfg.slidingWindow(), options.keyType(), options.valueType(), faults.ringWrap(), faults.slidingTruncate())
                : new FullLayerCache(stride, 64, options.keyType(), options.valueType(), faults.dropFirstPosition());
    }

    private static final int Q = 0, K = 1, V = 2, K_READ = 3, V_READ = 4, ATTN_OUT = 5, MLP_OUT = 6, MOE_OUT = 7, OUT = 8;

    public Gemma4Model model() { return model; }

    public EngineOptions options() { return options; }

    /** Tokens consumed so far; the next token goes to this position. */
    public int position() { return position; }

    /** Steps (forward calls) run so far. */
    public int step() { return step; }

    public void setProbe(Probe probe) { this.probe = probe; }

    public LayerCache cache(int layer) { return caches[layer]; }

    /** The tokens consumed so far, in position order. */
    public int[] tokens() { return Arrays.copyOf(history, position); }

    /** A deep copy of the session's state (caches, position, tokens) that {@link #restore} can resume from. */
    public KvSnapshot snapshot() {
        var copies = new LayerCache[caches.length];
        for (int i = 0; i < caches.length; i++) copies[i] = caches[i] == null ? null : caches[i].copy();
        return new KvSnapshot(model.directory(), options.keyType(), options.valueType(), copies, tokens());
    }

    /** Continues from a snapshot of a session over the same model and KV types; this session's state is replaced. */
    public void restore(KvSnapshot snap) {
        if (!snap.modelDir().equals(model.directory()))
            throw new IllegalArgumentException("snapshot was taken on " + snap.modelDir() + ", this session runs " + model.directory());
        if (snap.keyType() != options.keyType() || snap.valueType() != options.valueType())
            throw new IllegalArgumentException("snapshot stores K/V as " + snap.keyType() + "/" + snap.valueType()
                    + ", this session as " + options.keyType() + "/" + options.valueType());
        for (int i = 0; i < caches.length; i++) caches[i] = snap.caches()[i] == null ? null : snap.caches()[i].copy();
        int[] t = snap.tokens();
        history = Arrays.copyOf(t, Math.max(64, t.length * 2));
        position = t.length;
        ropeShift = faults.stalePosition() ? -1 : 0;
    }

    /**
     * Cuts the session back to its first {@code length} tokens. Full-attention caches can be cut anywhere; a
     * sliding-window ring only by one position (it has overwritten older ones), otherwise this throws
     * {@link CacheTruncationException} and the session is left as it was.
     */
    public void truncate(int length) {
        if (length < 0 || length > position) throw new CacheTruncationException("cannot cut a session of " + position + " tokens to " + length);
        for (var c : caches)
            if (c instanceof SlidingLayerCache sc && !faults.slidingTruncate() && !sc.canTruncateTo(length))
                sc.truncate(length); // throws with the explanation, before any cache is cut
        for (var c : caches) if (c != null) c.truncate(length);
        position = length;
    }

    /**
     * The naive "keep the last N tokens" trim many engines ship: drops the oldest cache rows and renumbers the rest
     * from 0, keeping each kept row as it was computed (rotated at its old position, with the dropped context in
     * its hidden state). It is exact for nothing; selfcheck shows where and why it departs from a fresh prefill.
     */
    public void keepLast(int n) {
        if (n <= 0 || n > position) throw new IllegalArgumentException("keepLast(" + n + ") on a session of " + position + " tokens");
        int drop = position - n;
        for (int i = 0; i < caches.length; i++) {
            var c = caches[i];
            if (c == null) continue;
            int stride = c.stride();
            float[] k = new float[n * stride], v = new float[n * stride];
            for (int p = drop; p < position; p++) {
                if (!c.holds(p)) continue; // a ring's overwritten rows: never read again after renumbering either
                c.readKey(p, k, (p - drop) * stride);
                c.readValue(p, v, (p - drop) * stride);
            }
            caches[i] = newCache(cfg.layer(i));
            caches[i].commit(0, n, k, v);
        }
        history = Arrays.copyOfRange(history, drop, drop + Math.max(64, n * 2));
        position = n;
    }

    /** Bytes the KV cache holds per position over all non-shared layers (K and V in their stored types). */
    public long kvBytesPerPosition() {
        long b = 0;
        for (var c : caches) if (c != null) b += c.bytesPerPosition();
        return b;
    }

    /** Token positions run through the layers so far: the work counter that exposes hidden recomputation. */
    public long positionsProcessed() { return positionsProcessed; }

    /** Feeds tokens at positions [position, position+T) and returns the logits at the last of them. */
    public float[] forward(int[] tokens) {
        if (tokens.length == 0) throw new IllegalArgumentException("forward needs at least one token");
        for (int id : tokens)
            if (id < 0 || id >= cfg.vocabSize()) throw new IllegalArgumentException("token id " + id + " is outside the vocabulary [0, " + cfg.vocabSize() + ")");
        if (faults.recomputeHistory() && position > 0) recomputeHistory();
        if (history.length < position + tokens.length) history = Arrays.copyOf(history, Math.max(history.length * 2, position + tokens.length));
        System.arraycopy(tokens, 0, history, position, tokens.length);
        return run(tokens);
    }

    /**
     * {@link #forward}, handing {@code atPrefix} on the way the session's state as it would stand had this call fed only
     * its first {@code prefix} tokens: the caches before the call with this pass's own keys and values of those
     * positions committed, no position computed twice. Each position's rows are computed on their own (every GEMM row
     * and attention row of a multi-token step is independent of the others), so a session restored from that state and
     * fed the remaining tokens — two or more of them — computes for them the bits this pass computed, with f32 caches:
     * an encoded cache hands back its own rounding of the rows this pass read unencoded.
     */
    public float[] forward(int[] tokens, int prefix, java.util.function.Consumer<KvSnapshot> atPrefix) {
        if (prefix < 1 || prefix >= tokens.length)
            throw new IllegalArgumentException("a state after " + prefix + " of a call's " + tokens.length + " tokens is no state within it");
        prefixState = atPrefix;
        prefixLength = prefix;
        try {
            return forward(tokens);
        } finally {
            prefixState = null;
        }
    }

    private java.util.function.Consumer<KvSnapshot> prefixState;
    private int prefixLength;

    /** The state after the first n rows of the step that began at start: copies of the caches with those rows committed. */
    private KvSnapshot stateWithin(int start, int n) {
        var copies = new LayerCache[caches.length];
        for (int i = 0; i < caches.length; i++) {
            if (caches[i] == null) continue;
            copies[i] = caches[i].copy();
            copies[i].commit(start, n, stepK[i], stepV[i]);
        }
        return new KvSnapshot(model.directory(), options.keyType(), options.valueType(), copies, Arrays.copyOf(history, start + n));
    }

    /** Fault decode-recompute: throw the caches away and re-read every earlier token, as a naive engine does. */
    private void recomputeHistory() {
        int end = position, savedStep = step;
        Probe saved = probe;
        var savedState = prefixState;
        probe = null;
        prefixState = null;
        resetCaches();
        position = 0;
        run(Arrays.copyOf(history, end));
        probe = saved;
        prefixState = savedState;
        step = savedStep;
    }

    private float[] run(int[] tokens) {
        int T = tokens.length, H = cfg.hidden(), start = position;
        positionsProcessed += T;
        if (probe != null) probe.beginStep(step, start, T);

        float[] x = new float[T * H];
        float embedScale = (float) Math.sqrt(H);
        for (int t = 0; t < T; t++) {
            w.embed().row(tokens[t], x, t * H);
            VectorMath.scale(x, t * H, H, embedScale);
        }
        capture(CapturePoints.EMBED, new int[]{T, H}, x, x.length);

        float[] ple = cfg.hasPle() ? perLayerInputs(tokens, x) : null;

        for (var spec : cfg.layers()) decoderLayer(spec, x, ple, T, start);

        float[] normed = new float[T * H];
        for (int t = 0; t < T; t++) VectorMath.rmsNorm(x, t * H, H, w.finalNorm(), cfg.rmsNormEps(), normed, t * H);
        capture(CapturePoints.FINAL_NORM, new int[]{T, H}, normed, normed.length);

        float[] logits = new float[cfg.vocabSize()];
        boolean softcap = cfg.hasSoftcap() && !faults.noSoftcap();
        float c = cfg.finalLogitSoftcap();
        if (softcap && matmul != MatmulPrecision.BF16 && w.lmHead().canMatvecThen()) {
            // the soft-cap of each piece of logits right after the head computed it (element-wise: the same bits)
            w.lmHead().matvecThen(normed, (T - 1) * H, logits, (from, to) -> Transcendentals.softcap(logits, from, to, c));
        } else {
            w.lmHead().matvec(normed, (T - 1) * H, logits, 0, matmul);
            if (softcap) Parallel.forRange(logits.length, 4096, (from, to) -> Transcendentals.softcap(logits, from, to, c));
        }
        capture(CapturePoints.LOGITS, new int[]{logits.length}, logits, logits.length);

        if (prefixState != null) prefixState.accept(stateWithin(start, prefixLength));
        for (var spec : cfg.layers()) {
            int i = spec.index();
            if (!spec.kvShared()) caches[i].commit(start, T, stepK[i], stepV[i]);
            stepK[i] = stepV[i] = null;
        }
        position += T;
        if (probe != null) probe.endStep(step, logits, Sampler.argmax(logits));
        step++;
        return logits;
    }

    /** Per-layer inputs (spec §2.2): [T, L, P]. */
    private float[] perLayerInputs(int[] tokens, float[] embedded) {
        int T = tokens.length, H = cfg.hidden(), L = cfg.numLayers(), P = cfg.pleDim(), LP = L * P;
        float[] proj = new float[T * LP];
        w.pleModelProjection().matmul(embedded, T, proj, matmul);
        float projScale = (float) StrictMath.pow(H, -0.5);
        float tokScale = faults.pleNoTableScale() ? 1f : (float) Math.sqrt(P);
        float combine = faults.pleNoCombine() ? 1f : (float) StrictMath.pow(2.0, -0.5);
        float[] tok = new float[LP];
        if (T > 1) w.pleEmbed().adviseLookups(tokens); // the prompt's rows read ahead together, not one fault at a time
        for (int t = 0; t < T; t++) {
            w.pleEmbed().row(tokens[t], tok, 0);
            releasePleRows();
            for (int j = 0; j < LP; j++) tok[j] *= tokScale;
            int base = t * LP;
            for (int j = 0; j < LP; j++) proj[base + j] *= projScale;
            for (int l = 0; l < L; l++) VectorMath.rmsNorm(proj, base + l * P, P, w.pleProjectionNorm(), cfg.rmsNormEps(), proj, base + l * P);
            for (int j = 0; j < LP; j++) proj[base + j] = (proj[base + j] + tok[j]) * combine;
        }
        capture(CapturePoints.PLE, new int[]{T, L, P}, proj, proj.length);
        return proj;
    }

    /**
     * Each row read from the per-layer table (gigabytes, in the checkpoint's mapping) can map a whole large page-cache
     * folio into this process (2 MB where readahead made one), far more than the row: a 4,096-token prompt of E2B's
     * 4.7 GB table left 3.5 GB of it resident. Every {@value #PLE_ROWS_MAPPED} rows those pages are let go (they stay
     * in the page cache), so the table adds at most that many folios to the resident set.
     */
    private void releasePleRows() {
        if (++pleRowsMapped < PLE_ROWS_MAPPED) return;
        pleRowsMapped = 0;
        if (w.pleEmbed().data().isMapped()) w.pleEmbed().data().unload();
    }

    private static final int PLE_ROWS_MAPPED = 64;
    private int pleRowsMapped;

    private void decoderLayer(LayerSpec spec, float[] x, float[] ple, int T, int start) {
        int H = cfg.hidden(), i = spec.index();
        var lw = w.layers().get(i);
        float eps = cfg.rmsNormEps();
        float[] h = scratch(S_H, T * H);
        rowsNorm(x, T, H, lw.inputNorm(), h);
        float[] a = attention(spec, lw, h, T, start);
        rowsNorm(a, T, H, lw.postAttentionNorm(), a);
        VectorMath.add(x, 0, a, 0, x.length);

        float[] residual = scratch(S_RES, T * H);
        System.arraycopy(x, 0, residual, 0, x.length);
        rowsNorm(x, T, H, lw.preFeedforwardNorm(), h);
        float[] m = mlp(lw.gate(), lw.up(), lw.down(), h, T);
        capture(names[i][MLP_OUT], new int[]{T, H}, m, T * H);
        if (lw.moe() != null) {
            float[] moe = moe(lw.moe(), residual, T);
            capture(names[i][MOE_OUT], new int[]{T, H}, moe, moe.length);
            rowsNorm(m, T, H, lw.moe().postFeedforwardNorm1(), m);
            rowsNorm(moe, T, H, lw.moe().postFeedforwardNorm2(), moe);
            VectorMath.add(m, 0, moe, 0, T * H);
        }
        rowsNorm(m, T, H, lw.postFeedforwardNorm(), m);
        VectorMath.sum(residual, 0, m, 0, x, 0, x.length);
        float s = faults.noLayerScalar() ? 1f : lw.layerScalar();
        if (faults.scalarBeforePle()) VectorMath.scale(x, 0, x.length, s);

        if (ple != null) {
            int P = cfg.pleDim(), L = cfg.numLayers();
            float[] g = scratch(S_PLE_GATE, T * P);
            lw.pleGate().matmul(x, T, g, matmul);
            float[] pl = scratch(S_PLE_IN, T * P); // this layer's per-layer inputs, row by row
            for (int t = 0; t < T; t++) System.arraycopy(ple, (faults.pleLayerMajor() ? i * T + t : t * L + i) * P, pl, t * P, P);
            Transcendentals.geluTanhTimes(g, pl, 0, T * P);
            float[] p = scratch(S_PLE_OUT, T * H);
            lw.pleProjection().matmul(g, T, p, matmul);
            rowsNorm(p, T, H, lw.plePostNorm(), p);
            VectorMath.add(x, 0, p, 0, x.length);
        }
        if (!faults.scalarBeforePle()) VectorMath.scale(x, 0, x.length, s);
        capture(names[i][OUT], new int[]{T, H}, x, x.length);
    }

    private void rowsNorm(float[] in, int T, int H, float[] weight, float[] out) {
        for (int t = 0; t < T; t++) VectorMath.rmsNorm(in, t * H, H, weight, cfg.rmsNormEps(), out, t * H);
    }

    /**
     * Attention of one layer (spec §2.4): the projections, norms and RoPE of this step's rows, then the window each
     * query reads ({@link #attendWindow}), then the output projection.
     */
    private float[] attention(LayerSpec spec, LayerWeights lw, float[] h, int T, int start) {
        int i = spec.index(), qDim = cfg.numHeads() * spec.headDim();
        Rope rope = faults.rope(model, spec);
        int posShift = (faults.decodePosition() && T == 1 && start > 0 ? 1 : 0) + ropeShift;
        rope.prepare(start + posShift, T);
        int stride = spec.kvHeads() * spec.headDim();
        float[] q = scratch(S_Q, T * qDim);
        float[] k = spec.kvShared() ? null : new float[T * stride];
        float[] v = spec.kvShared() || spec.kEqV() ? null : new float[T * stride];
        project(lw, h, T, q, k, v);
        queries(spec, lw, q, T, start + posShift, rope);
        if (!spec.kvShared()) keysAndValues(spec, lw, k, v, T, start + posShift, rope);
        float[] out = attendWindow(spec, q, T, start);
        capture(names[i][ATTN_OUT], new int[]{T, qDim}, out, T * qDim);

        float[] a = scratch(S_A, T * cfg.hidden());
        lw.o().matmul(out, T, a, matmul);
        addBias(a, T, lw.oBias());
        return a;
    }

    /**
     * The layer's projections h·Wq into q and, where given, h·Wk into k and h·Wv into v (before biases). A decode step
     * runs them as one parallel call when the native kernels take all three (they read the same h): the bits of three.
     */
    private void project(LayerWeights lw, float[] h, int T, float[] q, float[] k, float[] v) {
        if (T == 1 && matmul != MatmulPrecision.BF16 && k != null && WeightMatrix.canShareMatvec(lw.q(), lw.k())
                && (v == null || WeightMatrix.canShareMatvec(lw.q(), lw.v()))) {
            if (v == null) WeightMatrix.matvecAll(new WeightMatrix[]{lw.q(), lw.k()}, h, new float[][]{q, k});
            else WeightMatrix.matvecAll(new WeightMatrix[]{lw.q(), lw.k(), lw.v()}, h, new float[][]{q, k, v});
            return;
        }
        lw.q().matmul(h, T, q, matmul);
        if (k != null) lw.k().matmul(h, T, k, matmul);
        if (v != null) lw.v().matmul(h, T, v, matmul);
    }

    /** q = RoPE(q_norm(h·Wq)) per head from the projection in q, rows at positions from {@code ropeStart}. */
    private void queries(LayerSpec spec, LayerWeights lw, float[] q, int T, int ropeStart, Rope rope) {
        int nh = cfg.numHeads(), d = spec.headDim(), qDim = nh * d;
        float eps = cfg.rmsNormEps();
        addBias(q, T, lw.qBias());
        for (int t = 0; t < T; t++) {
            if (!faults.noQNorm())
                for (int hd = 0; hd < nh; hd++) VectorMath.rmsNorm(q, t * qDim + hd * d, d, lw.qNorm(), eps, q, t * qDim + hd * d);
            rope.apply(q, t * qDim, nh, ropeStart + t);
        }
        capture(names[spec.index()][Q], new int[]{T, nh, d}, q, T * qDim);
    }

    /**
     * This step's keys k = RoPE(k_norm(h·Wk)) and values v = v_norm(h·Wv) (k_eq_v layers: the raw k projection; v is
     * then null), from the projections in k and v, kept as the layer's step rows until the caches commit them after
     * the last layer.
     */
    private void keysAndValues(LayerSpec spec, LayerWeights lw, float[] k, float[] v, int T, int ropeStart, Rope rope) {
        int i = spec.index(), d = spec.headDim(), nkv = spec.kvHeads(), stride = nkv * d;
        float eps = cfg.rmsNormEps();
        float[] kNorm = faults.kNorm(lw.kNorm());
        addBias(k, T, lw.kBias());
        if (spec.kEqV()) {
            v = k.clone(); // k_eq_v: the value is the raw k projection, before k_norm and RoPE
        } else {
            addBias(v, T, lw.vBias());
        }
        for (int t = 0; t < T; t++) {
            for (int kh = 0; kh < nkv; kh++) {
                int o = t * stride + kh * d;
                if (!faults.noVNorm()) VectorMath.rmsNorm(v, o, d, null, eps, v, o);
                VectorMath.rmsNorm(k, o, d, kNorm, eps, k, o);
            }
            if (faults.valueAfterKNorm() && spec.kEqV()) System.arraycopy(k, t * stride, v, t * stride, stride);
            rope.apply(k, t * stride, nkv, ropeStart + t);
        }
        capture(names[i][K], new int[]{T, nkv, d}, k, k.length);
        capture(names[i][V], new int[]{T, nkv, d}, v, v.length);
        stepK[i] = k;
        stepV[i] = v;
    }

    /**
     * softmax(q·kᵀ)·v of every query row over the keys it may see (all earlier positions, or the sliding window),
     * reading the layer's cache (or its KV source's) plus this step's rows. The last row's keys and values are
     * offered to the probe as read back (attn.k_read / attn.v_read); a probe that replaces them substitutes what
     * the last row attends over. Query heads sharing a KV head run together, spread over the cores by (row, group).
     */
    private float[] attendWindow(LayerSpec spec, float[] q, int T, int start) {
        int i = spec.index(), nh = cfg.numHeads(), d = spec.headDim(), nkv = spec.kvHeads();
        int qDim = nh * d, stride = nkv * d, src = faults.kvSource()[i];
        boolean sliding = spec.type() == LayerType.SLIDING;
        int window = cfg.slidingWindow() + (faults.windowPlusOne() ? 1 : 0) - (faults.windowMinusTwo() ? 2 : 0);
        int last = start + T - 1;
        int lastLo = sliding ? Math.max(0, last - window + 1) : 0;
        boolean valuesFromKeys = faults.valuesFromKeys() && spec.kEqV() && T == 1 && start > 0;
        KeyValueView view = KeyValueView.of(caches[src], stepK[src], stepV[src], start, stride, sliding ? Math.max(0, start - window + 1) : 0,
                valuesFromKeys, packedAttention && d % 16 == 0);
        float[] readK = null, readV = null;
        if (probe != null && (probe.wants(names[i][K_READ]) || probe.wants(names[i][V_READ]))) {
            int C = last - lastLo + 1;
            readK = scratch(S_READ_K, C * stride); // the probe gets its own copy; a substitute stays here for this layer
            readV = scratch(S_READ_V, C * stride);
            for (int j = lastLo; j <= last; j++) view.copyRow(j, readK, readV, (j - lastLo) * stride);
            boolean kChanged = capture(names[i][K_READ], new int[]{C, nkv, d}, readK, C * stride);
            boolean vChanged = capture(names[i][V_READ], new int[]{C, nkv, d}, readV, C * stride);
            if (!kChanged && !vChanged) readK = readV = null;
        }

        float[] out = scratch(S_ATT, T * qDim);
        Arrays.fill(out, 0, T * qDim, 0f); // attention accumulates into it
        final float[] subK = readK, subV = readV;
        int[][] quads = headQuads(nh, nkv);
        // A long step's rows read their keys and values together, a block of rows at a time (the same bits, see
        // attendRows); rows reading packed history, or a probe's substitute, go one at a time.
        boolean together = T > 1 && d % 32 == 0 && (start == 0 || (view.packedK() == null && view.packedV() == null));
        int blockRows = together ? (subK != null ? T - 1 : T) : 0;
        if (blockRows > 1) attendRows(spec, q, blockRows, T, start, window, view, quads, out);
        int first = blockRows > 1 ? blockRows : 0;
        if (first == T) return out;
        Parallel.forRange((T - first) * quads.length, 1, (from, to) -> {
            // Fault prefill-bidirectional: a row also sees the step's later positions, so it may read more than W keys.
            int cap = sliding && !faults.bidirectionalPrefill() ? Math.min(window, last + 1) : last + 1;
            float[] scores = new float[VectorMath.HEADS * cap];
            float[][] keyRows = new float[cap][], valueRows = new float[cap][];
            int[] offsets = new int[cap], qOffs = new int[VectorMath.HEADS], slots = new int[cap];
            for (int task = from; task < to; task++) {
                int t = first + task / quads.length;
                int[] quad = quads[task % quads.length];
                int kh = quad[0], heads = quad.length - 1;
                int p = start + t;
                int lo = sliding ? Math.max(0, p - window + 1) : 0;
                int hi = faults.bidirectionalPrefill() ? last : p;
                int n = hi - lo + 1;
                boolean sub = subK != null && t == T - 1;
                for (int j = lo; j <= hi; j++) {
                    keyRows[j - lo] = sub ? subK : view.keys(j);
                    valueRows[j - lo] = sub ? subV : view.values(j);
                    offsets[j - lo] = (sub ? (j - lo) * stride : view.offset(j)) + kh * d;
                    if (j < start) slots[j - lo] = view.offset(j) / stride;
                }
                int packedRows = sub ? 0 : Math.max(0, start - lo); // history rows; this step's rows are f32
                for (int m = 0; m < heads; m++) qOffs[m] = t * qDim + quad[1 + m] * d;
                VectorMath.dotsHeads(q, qOffs, heads, view.span(view.packedK, slots, packedRows, kh * d), keyRows, offsets, n, d, scores, cap);
                if (faults.scoreScale()) for (int m = 0; m < heads; m++) VectorMath.scale(scores, m * cap, n, (float) (1 / Math.sqrt(d)));
                if (faults.scoreSoftcap()) for (int m = 0; m < heads; m++) Transcendentals.softcap(scores, m * cap, m * cap + n, 50f);
                for (int m = 0; m < heads; m++) VectorMath.softmax(scores, m * cap, n);
                VectorMath.weightedSumHeads(scores, cap, heads, view.span(view.packedV, slots, packedRows, kh * d), valueRows, offsets, n, d, out, qOffs);
            }
        });
        return out;
    }

    /** Query rows {@link #attendRows} takes per task: each block of keys and values is read once for this many rows. */
    private static final int ROWS_TOGETHER = 16;
    /** {@link #attendRows}'s scores, one buffer per thread (a block of a long prompt's rows: megabytes). */
    private static final ThreadLocal<float[]> ROW_SCORES = ThreadLocal.withInitial(() -> new float[0]);

    /**
     * Attention of rows [0, rows) of a step of T rows (spec §2.4) over a sliding layer's {@code window} as attendWindow sets it, {@link #ROWS_TOGETHER} rows of one head group per task:
     * where each row read its keys and values alone, a 4,096-token prefill re-read a full layer's 16 MB of keys and
     * values (past the L2) once per row and head group; a block of rows reads them together, block by block from L2.
     * Every score, weight and output is computed as for one row, so the bits are the same. Rows read f32 keys and values only.
     */
    private void attendRows(LayerSpec spec, float[] q, int rows, int T, int start, int window, KeyValueView view, int[][] quads, float[] out) {
        int nh = cfg.numHeads(), d = spec.headDim(), qDim = nh * d;
        boolean sliding = spec.type() == LayerType.SLIDING;
        int stepLast = start + T - 1;
        int blocks = (rows + ROWS_TOGETHER - 1) / ROWS_TOGETHER;
        // Later rows of a causal step read more keys: small pieces let the threads even out.
        Parallel.forRange(blocks * quads.length, 1, 16, (from, to) -> {
            int[][] qOffs = new int[ROWS_TOGETHER][VectorMath.HEADS];
            int[] lo = new int[ROWS_TOGETHER], count = new int[ROWS_TOGETHER], base = new int[ROWS_TOGETHER];
            for (int task = from; task < to; task++) {
                int t0 = task / quads.length * ROWS_TOGETHER, n = Math.min(ROWS_TOGETHER, rows - t0);
                int[] quad = quads[task % quads.length];
                int kh = quad[0], heads = quad.length - 1, first = Integer.MAX_VALUE, end = 0, cap = 0;
                for (int r = 0; r < n; r++) {
                    int p = start + t0 + r;
                    lo[r] = sliding ? Math.max(0, p - window + 1) : 0;
                    int hi = faults.bidirectionalPrefill() ? stepLast : p;
                    count[r] = hi - lo[r] + 1;
                    first = Math.min(first, lo[r]);
                    end = Math.max(end, hi + 1);
                    cap = Math.max(cap, count[r]);
                    for (int m = 0; m < heads; m++) qOffs[r][m] = (t0 + r) * qDim + quad[1 + m] * d;
                }
                float[][] keyRows = new float[end - first][], valueRows = new float[end - first][];
                int[] offsets = new int[end - first];
                for (int j = first; j < end; j++) {
                    keyRows[j - first] = view.keys(j);
                    valueRows[j - first] = view.values(j);
                    offsets[j - first] = view.offset(j) + kh * d;
                }
                for (int r = 0; r < n; r++) {
                    lo[r] -= first;
                    base[r] = r * VectorMath.HEADS * cap;
                }
                float[] scores = ROW_SCORES.get();
                if (scores.length < n * VectorMath.HEADS * cap) ROW_SCORES.set(scores = new float[n * VectorMath.HEADS * cap]);
                VectorMath.dotsHeadsRows(q, qOffs, heads, n, keyRows, offsets, lo, count, d, scores, base, cap);
                for (int r = 0; r < n; r++) {
                    for (int m = 0; m < heads; m++) {
                        int at = base[r] + m * cap;
                        if (faults.scoreScale()) VectorMath.scale(scores, at, count[r], (float) (1 / Math.sqrt(d)));
                        if (faults.scoreSoftcap()) Transcendentals.softcap(scores, at, at + count[r], 50f);
                        VectorMath.softmax(scores, at, count[r]);
                    }
                }
                VectorMath.weightedSumRows(scores, base, cap, heads, n, valueRows, offsets, lo, count, d, out, qOffs);
            }
        });
    }

    /**
     * The query heads of each KV head, at most {@link VectorMath#HEADS} to an entry: {kv head, query heads…}. Heads
     * that read the same keys and values are attended together, so each cache row is read once per entry, not once
     * per head. Under fault gqa-modulo a head reads KV head h mod nkv instead of h / (nh / nkv).
     */
    private int[][] headQuads(int nh, int nkv) {
        var out = new java.util.ArrayList<int[]>();
        for (int kh = 0; kh < nkv; kh++) {
            var heads = new java.util.ArrayList<Integer>();
            for (int h = 0; h < nh; h++) if ((faults.gqaModulo() ? h % nkv : h / (nh / nkv)) == kh) heads.add(h);
            for (int i = 0; i < heads.size(); i += VectorMath.HEADS) {
                var quad = heads.subList(i, Math.min(heads.size(), i + VectorMath.HEADS));
                int[] e = new int[quad.size() + 1];
                e[0] = kh;
                for (int j = 0; j < quad.size(); j++) e[j + 1] = quad.get(j);
                out.add(e);
            }
        }
        return out.toArray(int[][]::new);
    }

    /**
     * Keys and values by absolute position: committed history from the cache, this step's from the chunk. f32
     * caches are read in place; encoded ones (bf16, q8_0, q4_0) are read packed by the attention kernels, widened in
     * registers with the bits their decode gives (no decoded copy of the history each step). Where a head's slice
     * cannot be read packed (a q format with a head dim that is not a multiple of 16), or packed reads are switched off
     * ({@code -Ddecodiff.packedAttention=false}), the history this step reads is decoded once per layer and step into a
     * contiguous block instead; both give the same bits.
     */
    private record KeyValueView(float[] histK, float[] histV, int histLo, boolean inPlace, LayerCache cache,
                                PackedRows packedK, PackedRows packedV, boolean valuesFromKeys,
                                float[] chunkK, float[] chunkV, int start, int stride) {

        static KeyValueView of(LayerCache cache, float[] chunkK, float[] chunkV, int start, int stride, int histLo, boolean valuesFromKeys,
                               boolean packedReads) {
            for (int p = histLo; p < start; p++)
                if (!cache.holds(p)) throw new IllegalStateException("position " + p + " is no longer in the cache");
            float[] kf = cache.keysF32(), vf = valuesFromKeys ? kf : cache.valuesF32();
            PackedRows pk = cache.packedKeys(), pv = valuesFromKeys ? pk : cache.packedValues();
            if ((kf != null && vf != null) || packedReads)
                return new KeyValueView(kf, vf, 0, true, cache, pk, pv, valuesFromKeys, chunkK, chunkV, start, stride);
            int n = start - histLo;
            float[] hk = new float[n * stride], hv = new float[n * stride];
            for (int p = histLo; p < start; p++) {
                cache.readKey(p, hk, (p - histLo) * stride);
                if (valuesFromKeys) cache.readKey(p, hv, (p - histLo) * stride);
                else cache.readValue(p, hv, (p - histLo) * stride);
            }
            return new KeyValueView(hk, hv, histLo, false, cache, null, null, valuesFromKeys, chunkK, chunkV, start, stride);
        }

        /** The f32 array holding position p's row (null for a packed history row). */
        float[] keys(int p) { return p < start ? histK : chunkK; }

        float[] values(int p) { return p < start ? histV : chunkV; }

        int offset(int p) {
            if (p >= start) return (p - start) * stride;
            return inPlace ? cache.offset(p) : (p - histLo) * stride;
        }

        /** The history rows [0, count) of one attention task read packed, or null when these rows are f32. */
        PackedRows.Span span(PackedRows rows, int[] slots, int count, int column) {
            return rows == null || count == 0 ? null : new PackedRows.Span(rows, slots, count, column);
        }

        /** Position p's key and value rows as f32 into k and v at off (what the probe sees as read from the cache). */
        void copyRow(int p, float[] k, float[] v, int off) {
            if (p < start && packedK != null) cache.readKey(p, k, off);
            else System.arraycopy(keys(p), offset(p), k, off, stride);
            if (p < start && packedV != null) {
                if (valuesFromKeys) cache.readKey(p, v, off);
                else cache.readValue(p, v, off);
            } else System.arraycopy(values(p), offset(p), v, off, stride);
        }
    }

    private static void addBias(float[] y, int T, float[] bias) {
        if (bias == null) return;
        for (int t = 0; t < T; t++) VectorMath.add(y, t * bias.length, bias, 0, bias.length);
    }

    /**
     * The MLP of a long step runs {@value #MLP_ROWS} rows at a time: its gate and up activations are the step's largest
     * buffers (4,096 tokens of E2B's 12,288-wide MLP: 201 MB each), and every row's products are computed on their own,
     * so splitting the rows changes no bit. No piece is a single row (that would take the matvec kernel).
     */
    private static final int MLP_ROWS = 1024;

    private float[] mlp(WeightMatrix gate, WeightMatrix up, WeightMatrix down, float[] h, int T) {
        if (T <= MLP_ROWS + 1) return mlpRows(gate, up, down, h, T, scratch(S_MLP, T * down.rows()));
        int H = down.rows(), in = gate.cols();
        float[] out = scratch(S_MLP, T * H);
        for (int r0 = 0; r0 < T; ) {
            int n = T - r0 <= MLP_ROWS + 1 ? T - r0 : MLP_ROWS;
            float[] rows = scratch(S_MLP_IN, n * in);
            System.arraycopy(h, r0 * in, rows, 0, n * in);
            float[] part = mlpRows(gate, up, down, rows, n, scratch(S_MLP_OUT, n * H));
            System.arraycopy(part, 0, out, r0 * H, n * H);
            r0 += n;
        }
        return out;
    }

    private float[] mlpRows(WeightMatrix gate, WeightMatrix up, WeightMatrix down, float[] h, int T, float[] out) {
        int I = gate.rows();
        float[] g = scratch(S_G, T * I);
        float[] u = scratch(S_U, T * I);
        // The gated activation g·u, element-wise: splitting it over the cores, or running it on each piece of rows
        // as soon as decode's paired matvec has computed them, changes no bit.
        Parallel.RangeBody act = faults.silu() ? (from, to) -> { for (int j = from; j < to; j++) g[j] = g[j] / (1f + (float) Math.exp(-g[j])) * u[j]; }
                : faults.geluErf() ? (from, to) -> { for (int j = from; j < to; j++) g[j] = (float) ExactGelu.gelu(g[j]) * u[j]; }
                : (from, to) -> Transcendentals.geluTanhTimes(g, u, from, to);
        if (T == 1 && matmul != MatmulPrecision.BF16 && WeightMatrix.canShareMatvec(gate, up) && gate.rows() == up.rows()) {
            WeightMatrix.matvecPaired(gate, up, h, g, u, act);
        } else {
            gate.matmul(h, T, g, matmul);
            up.matmul(h, T, u, matmul);
            Parallel.forRange(T * I, 1024, act);
        }
        down.matmul(g, T, out, matmul);
        return out;
    }

    /**
     * The MoE branch (spec §2.6) on the post-attention residual r: router, top-k experts, weighted sum. Tokens are
     * routed first; then each expert multiplies all the tokens routed to it in one GEMM (a matvec per token read
     * the expert's weights once per token). On the FMA kernels the GEMM gives each token the bits of its matvec, and
     * experts are visited in index order, so every token still adds its experts' contributions in expert-index order,
     * as transformers does: the same bits as one token at a time. On AMX tiles (a prefill's default) a token's bits are
     * the tiles', routed alone or with others, so they do not depend on the rest of the step either.
     */
    private float[] moe(LayerWeights.Moe m, float[] r, int T) {
        int H = cfg.hidden(), E = cfg.numExperts(), K = cfg.topKExperts(), Im = cfg.moeIntermediate();
        float eps = cfg.rmsNormEps();
        float rootScale = (float) StrictMath.pow(H, -0.5);
        float[] z = new float[T * H];
        for (int t = 0; t < T; t++) {
            if (faults.routerUnnormed()) System.arraycopy(r, t * H, z, t * H, H);
            else VectorMath.rmsNorm(r, t * H, H, null, eps, z, t * H);
            for (int j = 0; j < H; j++) z[t * H + j] = z[t * H + j] * m.routerScale()[j] * rootScale;
        }
        float[] logits = new float[T * E];
        m.router().matmul(z, T, logits, matmul);
        float[] weight = new float[T * E];
        int[][] routed = new int[E][T];
        int[] count = new int[E];
        float[] u = z; // the router's input is spent: reuse it for the experts' input
        for (int t = 0; t < T; t++) {
            int o = t * E;
            VectorMath.softmax(logits, o, E);
            int[] top = dev.decodiff.engine.ops.MoeRouting.topK(logits, o, E, K);
            float sum = 0;
            for (int e : top) sum += logits[o + e];
            if (faults.routingNotRenormalised()) sum = 1f;
            for (int rank = 0; rank < K; rank++) {
                int e = top[rank];
                weight[o + e] = logits[o + e] / sum * m.perExpertScale()[faults.expertScaleByRank() ? rank : e];
            }
            for (int e : top) routed[e][count[e]++] = t;
            VectorMath.rmsNorm(r, t * H, H, m.preFeedforwardNorm2(), eps, u, t * H);
        }
        float[] out = new float[T * H];
        float[] x = new float[0], g = new float[0], act = new float[0], y = new float[0];
        for (int e = 0; e < E; e++) {
            int n = count[e];
            if (n == 0) continue;
            if (x.length < n * H) {
                x = new float[n * H];
                g = new float[n * Im];
                act = new float[n * Im];
                y = new float[n * H];
            }
            for (int k = 0; k < n; k++) System.arraycopy(u, routed[e][k] * H, x, k * H, H);
            // in a multi-token step one token alone takes the kernel of many, so its bits do not depend on how many
            // tokens the step routed beside it (a state within the step resumes with the same bits)
            if (T > 1) {
                m.gate()[e].matmulAnyTokens(x, n, g, matmul);
                m.up()[e].matmulAnyTokens(x, n, act, matmul);
            } else {
                m.gate()[e].matmul(x, n, g, matmul);
                m.up()[e].matmul(x, n, act, matmul);
            }
            for (int k = 0; k < n * Im; k++) act[k] = VectorMath.geluTanh(g[k]) * act[k];
            if (T > 1) m.down()[e].matmulAnyTokens(act, n, y, matmul);
            else m.down()[e].matmul(act, n, y, matmul);
            for (int k = 0; k < n; k++) {
                int t = routed[e][k];
                VectorMath.axpy(weight[t * E + e], y, k * H, out, t * H, H);
            }
        }
        return out;
    }

    /** Offers a tensor to the probe; returns whether the probe replaced it. */
    private boolean capture(String name, int[] shape, float[] buf, int len) {
        if (probe == null || !probe.wants(name)) return false;
        float[] copy = Arrays.copyOf(buf, len);
        float[] rep = probe.capture(name, shape, copy);
        if (rep == null) return false;
        if (rep.length != len)
            throw new IllegalArgumentException("probe replaced '" + name + "' with " + rep.length + " values, expected " + len);
        System.arraycopy(rep, 0, buf, 0, len);
        return true;
    }
}
