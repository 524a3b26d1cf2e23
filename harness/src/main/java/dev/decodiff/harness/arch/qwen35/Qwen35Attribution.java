package dev.decodiff.harness.arch.qwen35;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.ops.Format;
import dev.decodiff.engine.ops.Precision;
import dev.decodiff.engine.ops.StoredMatrices;
import dev.decodiff.engine.qwen35.Qwen35Config;
import dev.decodiff.engine.qwen35.Qwen35Model;
import dev.decodiff.engine.qwen35.Qwen35Ops;
import dev.decodiff.harness.compare.attribution.LocalError;
import dev.decodiff.harness.compare.attribution.RecordedInputsAttribution;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.function.Function;

/**
 * Local attribution of a Qwen3.5 side: every capture point recomputed by {@link Qwen35Ops} (the ops the engine's own
 * forward runs) from the side's own recorded inputs — the conv state written and q/k/v from the conv state read and
 * the layer's input; β and the decay from the layer's input; the delta rule's output and state from the state read
 * and this step's q, k, v, β, decay; linear.out from core_out and the layer's input (its z); the gated attention's
 * q/gate/k/v, its cache reads (the previous step's reads and this step's k/v), attn.out from q, gate, k_read, v_read;
 * the feed-forward block and the layer's out from the residual. State reads are the state the previous step wrote.
 *
 * <p>A recurrent state that comes back rounded to bf16 (or fp16) — stored in the model's dtype between steps — is a
 * bug of its own, not precision: transformers keeps that state in fp32 whatever the model's dtype, and the rounding
 * compounds over every later step. It is named ("recurrent state kept in bf16") and never excused.
 */
public final class Qwen35Attribution extends RecordedInputsAttribution {
    private final Qwen35Ops ops;
    private final Qwen35Config cfg;

    /**
     * @param everyCell measure every cell (a third-party candidate); false: only cells over tolerance (decodiff's own
     *                  engine, whose ops are these ops)
     */
    public Qwen35Attribution(Qwen35Model model, boolean everyCell) { this(model.ops(), everyCell, null, false); }

    /** With the GGUF's stored matrices known: ggml's matmuls on them become a hypothesis (a llama.cpp candidate). */
    public Qwen35Attribution(Qwen35Ops ops, boolean everyCell) { this(ops, everyCell, null, false); }

    private Qwen35Attribution(Qwen35Ops ops, boolean everyCell, Format stated, boolean reference) {
        super(everyCell, stated, reference);
        this.ops = ops;
        this.cfg = ops.config();
    }

    @Override
    public Qwen35Attribution stating(String dtype) { return new Qwen35Attribution(ops, everyCell, classOf(dtype), reference); }

    @Override
    public Qwen35Attribution forReference(String dtype) {
        var f = classOf(dtype);
        return new Qwen35Attribution(ops.model().ops(), false, f == null ? Format.F32 : f, true);
    }

    /** The GGUF tensors the stored-matrix hypothesis refused (not the checkpoint's within their type's rounding). */
    @Override
    public List<String> notes() { return StoredMatrices.notes(ops.stored()); }

    @Override
    public boolean carriesAcrossSteps(String kind) {
        return kind.equals(CapturePoints.LINEAR_CONV_STATE) || kind.equals(CapturePoints.LINEAR_STATE) || CapturePoints.isCacheRead(kind);
    }

    // ---- one cell ----------------------------------------------------------------------------------------------

    private static final Set<dev.decodiff.engine.qwen35.Qwen35Fault> NONE = Set.of();

    @Override
    protected int numLayers() { return cfg.numLayers(); }

    @Override
    protected LocalError attribute(String point, String kind, int layer, float[] cand) {
        double tol = FP32.tolerance(point);
        String in = layer < 0 ? null : layer == 0 ? CapturePoints.EMBED : CapturePoints.layer(layer - 1, CapturePoints.OUT);
        boolean linear = layer >= 0 && cfg.mixer(layer) == Qwen35Config.Mixer.LINEAR;
        String missing = null;
        Function<Precision, float[]> op;
        String from;
        List<Precision> hyps = matmulHypotheses();
        switch (kind) {
            case CapturePoints.EMBED -> {
                op = p -> ops.embed(stepTokens, p);
                from = "the tokens";
                hyps = activationHypotheses();
            }
            case CapturePoints.LINEAR_CONV_STATE_READ, CapturePoints.LINEAR_STATE_READ -> {
                String written = CapturePoints.layer(layer, kind.equals(CapturePoints.LINEAR_STATE_READ) ? CapturePoints.LINEAR_STATE : CapturePoints.LINEAR_CONV_STATE);
                float[] prev = previous.get(written);
                if (prev == null) return LocalError.unattributed(step, point, tol, "the side recorded no " + written + " at an earlier step");
                boolean state = kind.equals(CapturePoints.LINEAR_STATE_READ);
                // a conv state holds raw projection outputs: a store in the model's dtype is that dtype's rounding; the
                // recurrent state's is a bug (named below), never precision
                return stateNamed(judge(point, kind, cand, tol, p -> p.activations() == Format.F32 ? prev : Qwen35Ops.storedState(prev, p.activations()),
                        null, "the previous step's " + CapturePoints.kindOf(written), null, state ? List.of() : activationHypotheses()), state, cand, prev, tol);
            }
            case CapturePoints.LINEAR_CONV_STATE, CapturePoints.LINEAR_Q, CapturePoints.LINEAR_K, CapturePoints.LINEAR_V -> {
                String read = CapturePoints.layer(layer, CapturePoints.LINEAR_CONV_STATE_READ);
                if (!have.containsKey(in)) missing = in;
                else if (start > 0 && !have.containsKey(read)) missing = read;
                op = p -> {
                    var conv = ops.conv(layer, start > 0 ? have.get(read) : null, projections(layer, in, p).mixed(), T, p, NONE);
                    return switch (kind) {
                        case CapturePoints.LINEAR_CONV_STATE -> conv.state();
                        case CapturePoints.LINEAR_Q -> conv.q();
                        case CapturePoints.LINEAR_K -> conv.k();
                        default -> conv.v();
                    };
                };
                from = (start > 0 ? read + ", " : "") + in;
            }
            case CapturePoints.LINEAR_BETA -> {
                if (!have.containsKey(in)) missing = in;
                op = p -> ops.beta(layer, projections(layer, in, p).b(), T, p, NONE);
                from = in;
            }
            case CapturePoints.LINEAR_DECAY -> {
                if (!have.containsKey(in)) missing = in;
                op = p -> ops.decay(layer, projections(layer, in, p).a(), T, p, NONE);
                from = in;
            }
            case CapturePoints.LINEAR_CORE_OUT, CapturePoints.LINEAR_STATE -> {
                String read = CapturePoints.layer(layer, CapturePoints.LINEAR_STATE_READ);
                var needs = new ArrayList<String>();
                if (start > 0) needs.add(read);
                for (String k : List.of(CapturePoints.LINEAR_Q, CapturePoints.LINEAR_K, CapturePoints.LINEAR_V, CapturePoints.LINEAR_BETA, CapturePoints.LINEAR_DECAY))
                    needs.add(CapturePoints.layer(layer, k));
                for (String n : needs) if (!have.containsKey(n)) missing = n;
                boolean state = kind.equals(CapturePoints.LINEAR_STATE);
                op = p -> {
                    var core = ops.deltaRule(start > 0 ? have.get(read) : null, get(layer, CapturePoints.LINEAR_Q), get(layer, CapturePoints.LINEAR_K),
                            get(layer, CapturePoints.LINEAR_V), get(layer, CapturePoints.LINEAR_BETA), get(layer, CapturePoints.LINEAR_DECAY), T,
                            start > 0 && T == 1, p, NONE);
                    return state ? core.state() : core.out();
                };
                from = "its " + (start > 0 ? "state_read, " : "") + "q, k, v, beta, decay";
                if (missing == null && state) {
                    var e = judge(point, kind, cand, tol, op, null, from, null, List.of());
                    return stateNamed(e, true, cand, op.apply(Precision.EXACT), tol);
                }
                hyps = activationHypotheses();
            }
            case CapturePoints.LINEAR_OUT -> {
                String core = CapturePoints.layer(layer, CapturePoints.LINEAR_CORE_OUT);
                if (!have.containsKey(in)) missing = in;
                else if (!have.containsKey(core)) missing = core;
                op = p -> ops.gatedOut(layer, have.get(core), projections(layer, in, p).z(), T, p, NONE);
                from = core + ", " + in + " (its z)";
            }
            case CapturePoints.Q, CapturePoints.ATTN_GATE, CapturePoints.K, CapturePoints.V -> {
                if (!have.containsKey(in)) missing = in;
                op = p -> {
                    var qkv = ops.qkv(layer, normed(layer, in, p), T, start, p, NONE);
                    return switch (kind) {
                        case CapturePoints.Q -> qkv.q();
                        case CapturePoints.ATTN_GATE -> qkv.gate();
                        case CapturePoints.K -> qkv.k();
                        default -> qkv.v();
                    };
                };
                from = in;
            }
            case CapturePoints.K_READ, CapturePoints.V_READ -> {
                boolean keys = kind.equals(CapturePoints.K_READ);
                return cacheRead(point, keys, cand, tol, get(layer, keys ? CapturePoints.K : CapturePoints.V), previous.get(point),
                        cfg.numKvHeads() * cfg.headDim());
            }
            case CapturePoints.ATTN_OUT -> {
                var needs = List.of(CapturePoints.Q, CapturePoints.ATTN_GATE, CapturePoints.K_READ, CapturePoints.V_READ);
                for (String n : needs) if (!have.containsKey(CapturePoints.layer(layer, n))) missing = CapturePoints.layer(layer, n);
                var shortRead = missing == null ? cacheReadsShort(point, layer, cfg.numKvHeads() * cfg.headDim(), tol) : null;
                if (shortRead != null) return shortRead;
                op = p -> ops.attention(get(layer, CapturePoints.Q), get(layer, CapturePoints.ATTN_GATE), get(layer, CapturePoints.K_READ),
                        get(layer, CapturePoints.V_READ), T, start, p, NONE);
                from = "its q, gate, k_read, v_read";
                hyps = activationHypotheses();
            }
            case CapturePoints.MLP_OUT, CapturePoints.MOE_OUT -> {
                String mix = mixerPoint(layer, linear);
                if (!have.containsKey(in)) missing = in;
                else if (!have.containsKey(mix)) missing = mix;
                op = p -> ops.ffn(layer, ops.postAttentionNorm(layer, residual(layer, in, linear, p), T, p), T, p, NONE);
                from = in + ", " + mix;
            }
            case CapturePoints.OUT -> {
                String mix = mixerPoint(layer, linear), ffn = CapturePoints.layer(layer, cfg.moe() ? CapturePoints.MOE_OUT : CapturePoints.MLP_OUT);
                for (String n : List.of(in, mix, ffn)) if (!have.containsKey(n)) missing = n;
                op = p -> Qwen35Ops.add(residual(layer, in, linear, p), have.get(ffn), p);
                from = in + ", " + mix + ", " + ffn;
            }
            case CapturePoints.FINAL_NORM -> {
                String last = CapturePoints.layer(cfg.numLayers() - 1, CapturePoints.OUT);
                if (!have.containsKey(last)) missing = last;
                op = p -> ops.finalNorm(have.get(last), T, p);
                from = last;
                hyps = activationHypotheses();
            }
            case CapturePoints.LOGITS -> {
                if (!have.containsKey(CapturePoints.FINAL_NORM)) missing = CapturePoints.FINAL_NORM;
                op = p -> ops.logits(have.get(CapturePoints.FINAL_NORM), T, p);
                from = CapturePoints.FINAL_NORM;
            }
            default -> {
                return null;
            }
        }
        if (missing != null) return LocalError.unattributed(step, point, tol, "the side has no " + missing + ", an input of this op");
        return judge(point, kind, cand, tol, op, null, from, null, hyps);
    }

    /**
     * A state cell the exact op does not reproduce: when that state rounded to bf16 (or fp16) does, the side keeps
     * its recurrent state in that format between steps — a bug, named; otherwise the judgement stands.
     */
    private LocalError stateNamed(LocalError e, boolean recurrent, float[] cand, float[] exact, double tol) {
        if (!recurrent || e.status() == LocalError.Status.EXACT || exact == null || exact.length != cand.length) return e;
        for (var f : List.of(Format.BF16, Format.F16)) {
            double left = rel(cand, Qwen35Ops.storedState(exact, f), null);
            if (left <= tol)
                return new LocalError(step, e.point(), LocalError.Status.UNEXPLAINED, e.local(), tol, STATE_KEPT_IN + f.id()
                        + " between steps (its values are the fp32 state rounded to " + f.id() + "; transformers keeps it in fp32 whatever the model's dtype)",
                        left, e.from(), null);
        }
        return e;
    }

    // ---- shared sub-results --------------------------------------------------------------------------------------

    private String mixerPoint(int layer, boolean linear) {
        return CapturePoints.layer(layer, linear ? CapturePoints.LINEAR_OUT : CapturePoints.ATTN_OUT);
    }

    private float[] normed(int layer, String in, Precision p) {
        // recomputed each time, never cached: an envelope's sampled roundings and a near-tie's flips must reach every sub-op
        return ops.inputNorm(layer, have.get(in), T, p);
    }

    private Qwen35Ops.Projections projections(int layer, String in, Precision p) {
        return ops.projections(layer, normed(layer, in, p), T, p);
    }

    /** The residual after the mixer: the layer's input plus linear.out, or plus o_proj of attn.out. */
    private float[] residual(int layer, String in, boolean linear, Precision p) {
        float[] mix = linear ? get(layer, CapturePoints.LINEAR_OUT) : ops.attentionOutput(layer, get(layer, CapturePoints.ATTN_OUT), T, p);
        return Qwen35Ops.add(have.get(in), mix, p);
    }

    /** Besides the framework classes: ggml's matmuls on the GGUF's own matrices where they are known, else uniform half-precision inputs. */
    private List<Precision> matmulHypotheses() {
        if (ops.stored() == null) return uniformMatmulHypotheses();
        var out = new ArrayList<>(activationHypotheses());
        out.add(Precision.EXACT.withStoredMatrices(true));
        return out;
    }
}
