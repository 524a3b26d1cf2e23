package dev.decodiff.engine.ops;

import java.util.EnumSet;
import java.util.Set;

/**
 * A rewiring of one of {@link Gemma4Ops}' ops: the same math with a sub-op fed a neighbouring tensor, dropped,
 * applied twice or moved across its neighbour, or a weight or scalar taken from its neighbour. Passed beside the
 * {@link Precision}; {@link #NONE} is the op as Gemma 4 defines it. Bisect names a bug by the rewiring that
 * reproduces the candidate, in the words of {@link Wire#words()}. Replacing a whole input point by its neighbour
 * (this layer's input by the previous layer's) is the caller's: it passes that tensor.
 *
 * @param wires        the sub-op rewirings
 * @param scoreScale   attention's score multiplier (Gemma 4: 1)
 * @param scoreSoftcap a soft-cap on the scores, cap·tanh(s/cap); NaN for none (Gemma 4)
 * @param mask         which positions a query row sees
 * @param windowShift  the sliding window's length off by this many keys
 * @param weightsLayer the layer whose weights the op reads; -1 for its own
 */
public record Rewire(Set<Wire> wires, double scoreScale, double scoreSoftcap, Mask mask, int windowShift, int weightsLayer) {
    public static final Rewire NONE = new Rewire(EnumSet.noneOf(Wire.class), 1.0, Double.NaN, Mask.CAUSAL, 0, -1);

    public Rewire {
        wires = wires.isEmpty() ? EnumSet.noneOf(Wire.class) : EnumSet.copyOf(wires);
    }

    /** Which positions each query row of attention sees. */
    public enum Mask {
        /** Causal, and the sliding window on sliding layers (Gemma 4). */
        CAUSAL,
        /** Prompt rows also see the later prompt positions. */
        NO_CAUSAL_IN_PREFILL,
        /** Every row sees every position up to the step's last. */
        NONE,
        /** Causal, but a sliding layer attends to every earlier position. */
        NO_WINDOW
    }

    /** The op a wire changes (a {@link dev.decodiff.engine.CapturePoints} kind family). */
    public enum Op { QKV, ATTENTION, MLP, MOE, LAYER_OUT, PLE }

    /** One rewiring of a sub-op, and how a porter says it. */
    public enum Wire {
        // q, k, v
        INPUT_NORM_SKIPPED(Op.QKV, "input_layernorm absent (q/k/v project the un-normed residual)"),
        INPUT_NORM_ONE_PLUS(Op.QKV, "input_layernorm with (1+w) where Gemma 4 uses w"),
        Q_NORM_SKIPPED(Op.QKV, "q_norm absent"),
        Q_NORM_ONE_PLUS(Op.QKV, "q_norm with (1+w) where Gemma 4 uses w"),
        Q_NORM_K_WEIGHTS(Op.QKV, "q_norm with k_norm's weights"),
        Q_NORM_TWICE(Op.QKV, "q_norm applied twice"),
        Q_ROPE_BEFORE_NORM(Op.QKV, "RoPE applied to q before q_norm"),
        K_NORM_SKIPPED(Op.QKV, "k_norm absent"),
        K_NORM_ONE_PLUS(Op.QKV, "k_norm with (1+w) where Gemma 4 uses w"),
        K_NORM_Q_WEIGHTS(Op.QKV, "k_norm with q_norm's weights"),
        K_NORM_TWICE(Op.QKV, "k_norm applied twice"),
        K_ROPE_BEFORE_NORM(Op.QKV, "RoPE applied to k before k_norm"),
        V_NORM_SKIPPED(Op.QKV, "v_norm absent"),
        V_NORM_K_WEIGHTS(Op.QKV, "v_norm with k_norm's weights"),
        V_AFTER_K_NORM(Op.QKV, "the value is taken after k_norm (k_eq_v: v from the normed key)"),
        V_AFTER_K_ROPE(Op.QKV, "the value is taken after k_norm and RoPE (k_eq_v: v from the rotated key)"),
        // attention
        KV_HEAD_MODULO(Op.ATTENTION, "query head h reads KV head h mod nkv instead of h / (nh/nkv)"),
        SOFTMAX_EXTRA_ZERO_LOGIT(Op.ATTENTION, "an extra zero logit in the softmax's denominator (an off-by-one softmax)"),
        SOFTMAX_UNNORMALISED(Op.ATTENTION, "the softmax not normalised (exp(s − max) used as weights)"),
        // after attention, the dense MLP
        POST_ATTENTION_NORM_SKIPPED(Op.MLP, "post_attention_layernorm absent (o_proj's output added raw)"),
        PRE_FEEDFORWARD_NORM_SKIPPED(Op.MLP, "the MLP reads the un-normed residual (pre_feedforward_layernorm absent)"),
        MLP_READS_LAYER_INPUT(Op.MLP, "the MLP's residual is the layer's input (the attention branch not added before it)"),
        MLP_GELU_ERF(Op.MLP, "exact (erf) GELU instead of gelu_pytorch_tanh"),
        MLP_SILU(Op.MLP, "SiLU instead of gelu_pytorch_tanh"),
        MLP_RELU(Op.MLP, "ReLU instead of gelu_pytorch_tanh"),
        MLP_NO_ACTIVATION(Op.MLP, "no activation (gate · up)"),
        MLP_GATE_UP_SWAPPED(Op.MLP, "the gate and up projections swapped (the activation on up)"),
        // MoE
        ROUTER_UNNORMED(Op.MOE, "the router reads the un-normed residual"),
        ROUTER_READS_EXPERT_INPUT(Op.MOE, "the router reads the experts' input (pre_feedforward_layernorm_2's output)"),
        ROUTER_ROOT_SCALE_MISSING(Op.MOE, "the router's H^-½ scale is missing"),
        ROUTER_SCALE_MISSING(Op.MOE, "the router's learned scale (router.scale) is not applied"),
        EXPERTS_UNNORMED(Op.MOE, "the experts read the un-normed residual (pre_feedforward_layernorm_2 absent)"),
        EXPERTS_READ_DENSE_NORM(Op.MOE, "the experts read pre_feedforward_layernorm's output (the dense MLP's norm weight)"),
        ROUTING_NOT_RENORMALISED(Op.MOE, "the routing weights are not renormalised after top-k"),
        EXPERT_SCALE_MISSING(Op.MOE, "per_expert_scale is not applied"),
        EXPERT_SCALE_TWICE(Op.MOE, "per_expert_scale is applied twice"),
        EXPERT_SCALE_BY_RANK(Op.MOE, "per_expert_scale is indexed by the expert's rank in the top-k instead of its id"),
        TOP_K_TIES_LAST(Op.MOE, "top-k ties go to the higher expert index"),
        // the layer's out
        POST_FEEDFORWARD_NORM_SKIPPED(Op.LAYER_OUT, "post_feedforward_layernorm absent"),
        LAYER_SCALAR_TWICE(Op.LAYER_OUT, "layer_scalar applied twice"),
        LAYER_SCALAR_BEFORE_PLE(Op.LAYER_OUT, "layer_scalar is applied before the per-layer input branch"),
        PLE_BRANCH_SKIPPED(Op.LAYER_OUT, "the per-layer input branch is skipped"),
        PLE_BRANCH_BEFORE_MLP(Op.LAYER_OUT, "the per-layer input branch is computed from the residual before the MLP's add"),
        PLE_POST_NORM_SKIPPED(Op.LAYER_OUT, "post_per_layer_input_norm absent"),
        PLE_SLICE_LAYER_MAJOR(Op.LAYER_OUT, "the gate's per-layer slice read layer-major ([L, T, P]) where ple is token-major ([T, L, P])"),
        // the per-layer inputs
        PLE_TABLE_SCALE_MISSING(Op.PLE, "the PLE table's √P scale is missing"),
        PLE_PROJECTION_SCALE_MISSING(Op.PLE, "the projection's H^-½ scale is missing"),
        PLE_COMBINE_MISSING(Op.PLE, "the 2^-½ combine is missing"),
        PLE_PROJECTION_NORM_SKIPPED(Op.PLE, "per_layer_projection_norm absent"),
        PLE_TABLE_ONLY(Op.PLE, "the per-layer inputs are the table alone (the projection of the embedding dropped)");

        private final Op op;
        private final String words;

        Wire(Op op, String words) {
            this.op = op;
            this.words = words;
        }

        public Op op() { return op; }

        public String words() { return words; }
    }

    public static Rewire of(Wire w) { return NONE.with(w); }

    public Rewire with(Wire w) {
        var s = EnumSet.noneOf(Wire.class);
        s.addAll(wires);
        s.add(w);
        return new Rewire(s, scoreScale, scoreSoftcap, mask, windowShift, weightsLayer);
    }

    public boolean has(Wire w) { return wires.contains(w); }

    public Rewire withScoreScale(double s) { return new Rewire(wires, s, scoreSoftcap, mask, windowShift, weightsLayer); }

    public Rewire withScoreSoftcap(double c) { return new Rewire(wires, scoreScale, c, mask, windowShift, weightsLayer); }

    public Rewire withMask(Mask m) { return new Rewire(wires, scoreScale, scoreSoftcap, m, windowShift, weightsLayer); }

    public Rewire withWindowShift(int k) { return new Rewire(wires, scoreScale, scoreSoftcap, mask, k, weightsLayer); }

    public Rewire withWeightsLayer(int l) { return new Rewire(wires, scoreScale, scoreSoftcap, mask, windowShift, l); }

    public boolean none() { return equals(NONE); }
}
