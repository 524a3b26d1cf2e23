package dev.decodiff.engine.qwen35;

import dev.decodiff.engine.CapturePoints;

import java.util.Arrays;
import java.util.Collection;
import java.util.EnumSet;
import java.util.Set;

/**
 * Qwen3.5's catalog of realistic porting bugs, each switchable in {@link Qwen35Session}'s real code path (off by
 * default), with the cell where a correct harness must localize it: the step, which layer and the point kind. The
 * state hand-over bugs are named at the state read, not at the layer output computed from it.
 */
public enum Qwen35Fault {
    CONV_STATE_NOT_CARRIED("conv-state-not-carried",
            "decode steps start from a zero conv state instead of the one prefill left (the conv state is dropped between calls)",
            Expected.decode(1, Layer.FIRST_LINEAR, CapturePoints.LINEAR_CONV_STATE_READ)),
    STATE_NOT_CARRIED("state-not-carried",
            "decode steps start from a zero recurrent state instead of the one prefill left",
            Expected.decode(1, Layer.FIRST_LINEAR, CapturePoints.LINEAR_STATE_READ)),
    STATE_STALE("state-stale",
            "decode steps read the recurrent state from a ping-pong buffer one step behind: from the second decode step on, each reads the state before the previous step's update",
            Expected.decode(2, Layer.FIRST_LINEAR, CapturePoints.LINEAR_STATE_READ)),
    PREFIX_REUSE_WITHOUT_STATE("prefix-reuse-without-state",
            "a session restored from a prefix snapshot takes its attention KV but starts its conv and recurrent states from zero (a prompt cache that checkpoints only attention)",
            Expected.afterRestore(Layer.FIRST_LINEAR, CapturePoints.LINEAR_CONV_STATE_READ)),
    STATE_KEPT_IN_BF16("state-kept-in-bf16",
            "the recurrent state is stored in bf16 between steps (a cache buffer of the model's dtype) where transformers keeps it in fp32",
            Expected.prefill(Layer.FIRST_LINEAR, CapturePoints.LINEAR_STATE)),
    DECAY_EXP_TWICE("decay-exp-twice",
            "the layer hands the kernel the decay exp(g) where it expects the log decay g (the kernel exponentiates again)",
            Expected.prefill(Layer.FIRST_LINEAR, CapturePoints.LINEAR_DECAY)),
    DECAY_SIGN_FLIPPED("decay-sign-flipped",
            "the log decay is +exp(A_log)·softplus(a + dt_bias): a growth instead of a decay",
            Expected.prefill(Layer.FIRST_LINEAR, CapturePoints.LINEAR_DECAY)),
    BETA_NOT_SIGMOIDED("beta-not-sigmoided",
            "β is the raw in_proj_b output, without its sigmoid",
            Expected.prefill(Layer.FIRST_LINEAR, CapturePoints.LINEAR_BETA)),
    GATED_NORM_NO_GATE("gated-norm-no-gate",
            "the gated RMSNorm after the kernel leaves out its gate silu(z)",
            Expected.prefill(Layer.FIRST_LINEAR, CapturePoints.LINEAR_OUT)),
    GATED_NORM_ONE_PLUS("gated-norm-one-plus",
            "the gated RMSNorm multiplies by (1+w), the convention of the model's other norms, where it multiplies by w",
            Expected.prefill(Layer.FIRST_LINEAR, CapturePoints.LINEAR_OUT)),
    QK_L2NORM_MISSING("qk-l2norm-missing",
            "the linear-attention queries and keys skip their l2 norm",
            Expected.prefill(Layer.FIRST_LINEAR, CapturePoints.LINEAR_Q)),
    CONV_TAPS_REVERSED("conv-taps-reversed",
            "the causal conv applies its taps in reverse (tap 0 to the current token)",
            Expected.prefill(Layer.FIRST_LINEAR, CapturePoints.LINEAR_Q)),
    LINEAR_HEADS_TILED("linear-heads-tiled",
            "value head h reads key head h mod Hk (tiled) instead of h / (Hv/Hk) (grouped)",
            Expected.prefill(Layer.FIRST_LINEAR, CapturePoints.LINEAR_Q)),
    DECODE_DECAY_AFTER_UPDATE("decode-decay-after-update",
            "the one-token (recurrent) kernel decays the state after the delta update instead of before it; prefill's chunked kernel is right",
            Expected.decode(1, Layer.FIRST_LINEAR, CapturePoints.LINEAR_CORE_OUT)),
    ATTN_OUTPUT_GATE_MISSING("attn-output-gate-missing",
            "gated attention's output is not multiplied by sigmoid(gate)",
            Expected.prefill(Layer.FIRST_FULL, CapturePoints.ATTN_OUT)),
    PARTIAL_ROPE_WHOLE_HEAD("partial-rope-whole-head",
            "full attention rotates the whole head (head_dim rotary dims) instead of its partial_rotary_factor share",
            Expected.prefill(Layer.FIRST_FULL, CapturePoints.Q)),
    MOE_SHARED_GATE_MISSING("moe-shared-gate-missing",
            "the MoE shared expert is added without its sigmoid gate",
            Expected.prefill(Layer.FIRST_MOE, CapturePoints.MOE_OUT));

    /** Which layer a fault first shows in. */
    public enum Layer { FIRST_LINEAR, FIRST_FULL, FIRST_MOE }

    /**
     * Where a fault must be localized: step {@code step} (0 is the prefill; a decode fault names the first decode
     * step it can show at), the first layer of {@code layer}'s kind, point kind {@code kind}. A fault that needs a
     * restore from a snapshot ({@code afterRestore}) never shows in a reference case, decoded straight through: it
     * is found by selfcheck's prefix-reuse, at the first position after the restored prefix.
     */
    public record Expected(int step, Layer layer, String kind, boolean afterRestore) {
        static Expected prefill(Layer layer, String kind) { return new Expected(0, layer, kind, false); }

        static Expected decode(int step, Layer layer, String kind) { return new Expected(step, layer, kind, false); }

        static Expected afterRestore(Layer layer, String kind) { return new Expected(-1, layer, kind, true); }

        /** The layer index in this config, or -1 where the config has no such layer (the fault cannot show). */
        public int layerIn(Qwen35Config cfg) {
            for (int i = 0; i < cfg.numLayers(); i++) {
                boolean hit = switch (layer) {
                    case FIRST_LINEAR -> cfg.mixer(i) == Qwen35Config.Mixer.LINEAR;
                    case FIRST_FULL -> cfg.mixer(i) == Qwen35Config.Mixer.FULL;
                    case FIRST_MOE -> cfg.moe();
                };
                if (hit) return i;
            }
            return -1;
        }

        /** The full point name in this config, or null where the fault cannot show. */
        public String pointIn(Qwen35Config cfg) {
            int i = layerIn(cfg);
            return i < 0 ? null : CapturePoints.layer(i, kind);
        }

        @Override
        public String toString() {
            return (afterRestore ? "selfcheck prefix-reuse: the first position after the restored prefix" : "step " + step) + ", the " + switch (layer) {
                case FIRST_LINEAR -> "first linear-attention layer";
                case FIRST_FULL -> "first full-attention layer";
                case FIRST_MOE -> "first MoE layer";
            } + ", " + kind;
        }
    }

    private final String id;
    private final String description;
    private final Expected expected;

    Qwen35Fault(String id, String description, Expected expected) {
        this.id = id;
        this.description = description;
        this.expected = expected;
    }

    public String id() { return id; }

    public String description() { return description; }

    public Expected expected() { return expected; }

    public static Qwen35Fault byId(String id) {
        for (var f : values()) if (f.id.equals(id)) return f;
        throw new IllegalArgumentException("unknown Qwen3.5 fault '" + id + "'; its catalog has: "
                + String.join(", ", Arrays.stream(values()).map(Qwen35Fault::id).toList()));
    }

    /** The faults named by these ids (each must be in the catalog). */
    public static Set<Qwen35Fault> byIds(Collection<String> ids) {
        var out = EnumSet.noneOf(Qwen35Fault.class);
        for (String id : ids) out.add(byId(id));
        return out;
    }

    @Override
    public String toString() { return id; }
}
