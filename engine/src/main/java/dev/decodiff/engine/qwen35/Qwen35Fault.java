package dev.decodiff.engine.qwen35;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.arch.CatalogFault;

import java.util.Collection;
import java.util.Set;

/**
 * Qwen3.5's catalog of realistic porting bugs, each switchable in {@link Qwen35Session}'s real code path (off by
 * default), with the cell where a correct harness must localize it: the step, which layer and the point kind. The
 * state hand-over bugs are named at the state read, not at the layer output computed from it.
 */
public enum Qwen35Fault implements CatalogFault {
    CONV_STATE_NOT_CARRIED("conv-state-not-carried",
            "decode steps start from a zero conv state instead of the one prefill left (the conv state is dropped between calls)",
            Expected.at(When.FIRST_DECODE, Layer.FIRST_LINEAR, CapturePoints.LINEAR_CONV_STATE_READ)),
    STATE_NOT_CARRIED("state-not-carried",
            "decode steps start from a zero recurrent state instead of the one prefill left",
            Expected.at(When.FIRST_DECODE, Layer.FIRST_LINEAR, CapturePoints.LINEAR_STATE_READ)),
    STATE_STALE("state-stale",
            "decode steps read the recurrent state from a ping-pong buffer one step behind: from the second decode step on, each reads the state before the previous step's update",
            Expected.at(When.DECODE_AFTER_DECODE, Layer.FIRST_LINEAR, CapturePoints.LINEAR_STATE_READ)),
    PREFIX_REUSE_WITHOUT_STATE("prefix-reuse-without-state",
            "a session restored from a prefix snapshot takes its attention KV but starts its conv and recurrent states from zero (a prompt cache that checkpoints only attention)",
            Expected.afterRestore(Layer.FIRST_LINEAR, CapturePoints.LINEAR_CONV_STATE_READ)),
    STATE_KEPT_IN_BF16("state-kept-in-bf16",
            "the recurrent state is stored in bf16 between steps (a cache buffer of the model's dtype) where transformers keeps it in fp32",
            Expected.at(When.PREFILL, Layer.FIRST_LINEAR, CapturePoints.LINEAR_STATE)),
    DECAY_EXP_TWICE("decay-exp-twice",
            "the layer hands the kernel the decay exp(g) where it expects the log decay g (the kernel exponentiates again)",
            Expected.at(When.PREFILL, Layer.FIRST_LINEAR, CapturePoints.LINEAR_DECAY)),
    DECAY_SIGN_FLIPPED("decay-sign-flipped",
            "the log decay is +exp(A_log)·softplus(a + dt_bias): a growth instead of a decay",
            Expected.at(When.PREFILL, Layer.FIRST_LINEAR, CapturePoints.LINEAR_DECAY)),
    BETA_NOT_SIGMOIDED("beta-not-sigmoided",
            "β is the raw in_proj_b output, without its sigmoid",
            Expected.at(When.PREFILL, Layer.FIRST_LINEAR, CapturePoints.LINEAR_BETA)),
    GATED_NORM_NO_GATE("gated-norm-no-gate",
            "the gated RMSNorm after the kernel leaves out its gate silu(z)",
            Expected.at(When.PREFILL, Layer.FIRST_LINEAR, CapturePoints.LINEAR_OUT)),
    GATED_NORM_ONE_PLUS("gated-norm-one-plus",
            "the gated RMSNorm multiplies by (1+w), the convention of the model's other norms, where it multiplies by w",
            Expected.at(When.PREFILL, Layer.FIRST_LINEAR, CapturePoints.LINEAR_OUT)),
    QK_L2NORM_MISSING("qk-l2norm-missing",
            "the linear-attention queries and keys skip their l2 norm",
            Expected.at(When.PREFILL, Layer.FIRST_LINEAR, CapturePoints.LINEAR_Q)),
    CONV_TAPS_REVERSED("conv-taps-reversed",
            "the causal conv applies its taps in reverse (tap 0 to the current token)",
            Expected.at(When.PREFILL, Layer.FIRST_LINEAR, CapturePoints.LINEAR_Q)),
    LINEAR_HEADS_TILED("linear-heads-tiled",
            "value head h reads key head h mod Hk (tiled) instead of h / (Hv/Hk) (grouped)",
            Expected.at(When.PREFILL, Layer.FIRST_LINEAR, CapturePoints.LINEAR_Q)),
    DECODE_DECAY_AFTER_UPDATE("decode-decay-after-update",
            "the one-token (recurrent) kernel decays the state after the delta update instead of before it; prefill's chunked kernel is right",
            Expected.at(When.FIRST_DECODE, Layer.FIRST_LINEAR, CapturePoints.LINEAR_CORE_OUT)),
    ATTN_OUTPUT_GATE_MISSING("attn-output-gate-missing",
            "gated attention's output is not multiplied by sigmoid(gate)",
            Expected.at(When.PREFILL, Layer.FIRST_FULL, CapturePoints.ATTN_OUT)),
    PARTIAL_ROPE_WHOLE_HEAD("partial-rope-whole-head",
            "full attention rotates the whole head (head_dim rotary dims) instead of its partial_rotary_factor share",
            Expected.at(When.PREFILL, Layer.FIRST_FULL, CapturePoints.Q)),
    MOE_SHARED_GATE_MISSING("moe-shared-gate-missing",
            "the MoE shared expert is added without its sigmoid gate",
            Expected.at(When.PREFILL, Layer.FIRST_MOE, CapturePoints.MOE_OUT)),
    NORM_ONE_PLUS_TWICE("norm-one-plus-twice",
            "the zero-centred RMSNorms multiply by (2+w): the +1 a converter already folded into the weight is added again",
            Expected.firstLayer(CapturePoints.LINEAR_CONV_STATE, CapturePoints.Q)),
    QUERY_GATE_SPLIT_HALVES("query-gate-split-halves",
            "q_proj's output is split into query and gate as the two halves of the whole projection, not per head (query then gate within each head)",
            Expected.at(When.PREFILL, Layer.FIRST_FULL, CapturePoints.Q)),
    QK_L2NORM_MEAN("qk-l2norm-mean",
            "the linear-attention q and k are normed by the root mean square over the head dim (an RMSNorm) instead of the root sum of squares",
            Expected.at(When.PREFILL, Layer.FIRST_LINEAR, CapturePoints.LINEAR_Q)),
    BETA_MISSING("beta-missing",
            "the delta-rule kernel leaves β out of the update (β = 1): β is computed but never reaches the kernel",
            Expected.at(When.PREFILL, Layer.FIRST_LINEAR, CapturePoints.LINEAR_CORE_OUT)),
    CONV_STATE_DROPPED_ON_CONTINUATION("conv-state-dropped-on-continuation",
            "a multi-token step on a warm session (a continuation) starts its conv from zeros, as a fresh prompt would, instead of from the conv state the earlier steps left",
            Expected.at(When.FIRST_CONTINUATION, Layer.FIRST_LINEAR, CapturePoints.LINEAR_CONV_STATE_READ));

    /** Which layer a fault first shows in: layer 0 whatever its kind, or the first of a kind. */
    public enum Layer { FIRST, FIRST_LINEAR, FIRST_FULL, FIRST_MOE }

    /** Which step a fault first shows at, as a rule over a case's steps (each a start position and a length). */
    public enum When {
        /** step 0, the prompt */
        PREFILL,
        /** the first one-token step after the prompt */
        FIRST_DECODE,
        /** the first one-token step that follows a one-token step (a lagging buffer shows only there) */
        DECODE_AFTER_DECODE,
        /** the first multi-token step on a warm session */
        FIRST_CONTINUATION,
        /** never in a case decoded straight through: selfcheck's prefix-reuse, the first position after the prefix */
        AFTER_RESTORE
    }

    /**
     * Where a fault must be localized: the step {@code when} picks in a case, the layer {@code layer} picks in a
     * config, and the point kind there ({@code linearKind} on a linear-attention layer, {@code fullKind} on a full
     * one; the rules of a kind-specific layer use only their own). Resolved on a config and a case's steps, never by
     * running the engine: the transformers references then judge whether the engine and the harness agree with it.
     */
    public record Expected(When when, Layer layer, String linearKind, String fullKind) {
        static Expected at(When when, Layer layer, String kind) { return new Expected(when, layer, kind, kind); }

        static Expected afterRestore(Layer layer, String kind) { return at(When.AFTER_RESTORE, layer, kind); }

        /** Layer 0 at step 0, at the first point its mixer records in a prompt step. */
        static Expected firstLayer(String linearKind, String fullKind) { return new Expected(When.PREFILL, Layer.FIRST, linearKind, fullKind); }

        public boolean afterRestore() { return when == When.AFTER_RESTORE; }

        /**
         * The step index in a case whose step s feeds [starts[s], starts[s]+lengths[s]), or -1 where no step fits (the
         * fault cannot show in that case; also for {@link When#AFTER_RESTORE}).
         */
        public int stepIn(int[] starts, int[] lengths) {
            for (int s = 0; s < starts.length; s++) {
                boolean warm = starts[s] > 0;
                boolean hit = switch (when) {
                    case PREFILL -> s == 0;
                    case FIRST_DECODE -> warm && lengths[s] == 1;
                    case DECODE_AFTER_DECODE -> warm && lengths[s] == 1 && s > 0 && starts[s - 1] > 0 && lengths[s - 1] == 1;
                    case FIRST_CONTINUATION -> warm && lengths[s] > 1;
                    case AFTER_RESTORE -> false;
                };
                if (hit) return s;
            }
            return -1;
        }

        /** The layer index in this config, or -1 where the config has no such layer (the fault cannot show). */
        public int layerIn(Qwen35Config cfg) {
            for (int i = 0; i < cfg.numLayers(); i++) {
                boolean hit = switch (layer) {
                    case FIRST -> true;
                    case FIRST_LINEAR -> cfg.mixer(i) == Qwen35Config.Mixer.LINEAR;
                    case FIRST_FULL -> cfg.mixer(i) == Qwen35Config.Mixer.FULL;
                    case FIRST_MOE -> cfg.moe();
                };
                if (hit) return i;
            }
            return -1;
        }

        /** The point kind on layer {@code i} of this config. */
        public String kindIn(Qwen35Config cfg, int i) { return cfg.mixer(i) == Qwen35Config.Mixer.LINEAR ? linearKind : fullKind; }

        /** The full point name in this config, or null where the fault cannot show. */
        public String pointIn(Qwen35Config cfg) {
            int i = layerIn(cfg);
            return i < 0 ? null : CapturePoints.layer(i, kindIn(cfg, i));
        }

        @Override
        public String toString() {
            String step = switch (when) {
                case PREFILL -> "step 0";
                case FIRST_DECODE -> "the first decode step";
                case DECODE_AFTER_DECODE -> "the second decode step";
                case FIRST_CONTINUATION -> "the first multi-token continuation";
                case AFTER_RESTORE -> "selfcheck prefix-reuse: the first position after the restored prefix";
            };
            String where = switch (layer) {
                case FIRST -> "layer 0";
                case FIRST_LINEAR -> "the first linear-attention layer";
                case FIRST_FULL -> "the first full-attention layer";
                case FIRST_MOE -> "the first MoE layer";
            };
            String kind = linearKind.equals(fullKind) ? linearKind : linearKind + " (" + fullKind + " if it is a full-attention layer)";
            return step + ", " + where + ", " + kind;
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

    @Override
    public String id() { return id; }

    public String description() { return description; }

    public Expected expected() { return expected; }

    public static Qwen35Fault byId(String id) { return CatalogFault.byId(Qwen35Fault.class, "Qwen3.5", id); }

    /** The faults named by these ids (each must be in the catalog). */
    public static Set<Qwen35Fault> byIds(Collection<String> ids) { return CatalogFault.byIds(Qwen35Fault.class, "Qwen3.5", ids); }

    @Override
    public String toString() { return id; }
}
