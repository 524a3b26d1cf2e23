package dev.decodiff.engine.llama;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.arch.CatalogFault;

import java.util.Collection;
import java.util.Set;

/**
 * The Llama family's catalog of realistic porting bugs, each switchable in {@link LlamaSession}'s real code path (off
 * by default), with the cell where a correct harness must localize it: the step, the layer (or none, for a model-level
 * point) and the point kind. A fault that needs something of the checkpoint (qwen3's q/k norms, llama3 RoPE scaling,
 * an lm_head of its own) cannot show on one without it, and says so through {@link Expected#appliesTo}.
 */
public enum LlamaFault implements CatalogFault {
    ROPE_INTERLEAVED("rope-interleaved",
            "RoPE rotates adjacent pairs (x[2j], x[2j+1]) the GPT-J way where the checkpoint pairs x[j] with x[j+d/2] (rotate-half, NeoX)",
            Expected.at(When.PREFILL, Layer.FIRST, CapturePoints.Q, Requires.NOTHING)),
    KV_HEADS_TILED("kv-heads-tiled",
            "query head h reads KV head h mod Hkv (tiled) instead of h / (H/Hkv) (grouped)",
            Expected.at(When.PREFILL, Layer.FIRST, CapturePoints.ATTN_OUT, Requires.GROUPED_KV)),
    QK_NORM_MISSING("qk-norm-missing",
            "qwen3's per-head q_norm and k_norm are skipped (a Llama port reused for Qwen3)",
            Expected.at(When.PREFILL, Layer.FIRST, CapturePoints.Q, Requires.QK_NORM)),
    QK_NORM_AFTER_ROPE("qk-norm-after-rope",
            "qwen3's per-head q_norm and k_norm are applied after RoPE instead of before it",
            Expected.at(When.PREFILL, Layer.FIRST, CapturePoints.Q, Requires.QK_NORM)),
    ATTN_SCALE_INV_D("attn-scale-inv-d",
            "attention scores are scaled by 1/d instead of 1/sqrt(d)",
            Expected.at(When.PREFILL, Layer.FIRST, CapturePoints.ATTN_OUT, Requires.NOTHING)),
    RMSNORM_ONE_PLUS_WEIGHT("rmsnorm-one-plus-weight",
            "RMSNorm multiplies by (1 + w), Gemma's zero-centred convention, where Llama's multiplies by w",
            Expected.at(When.PREFILL, Layer.FIRST, CapturePoints.Q, Requires.NOTHING)),
    ROPE_SCALING_IGNORED("rope-scaling-ignored",
            "Llama 3's rope_scaling (rope_type llama3) is ignored: every layer rotates with the unscaled frequencies",
            Expected.at(When.PREFILL, Layer.FIRST, CapturePoints.Q, Requires.LLAMA3_ROPE)),
    SWIGLU_GATE_UP_SWAPPED("swiglu-gate-up-swapped",
            "the MLP computes silu(up(x))·gate(x): gate_proj and up_proj swapped",
            Expected.at(When.PREFILL, Layer.FIRST, CapturePoints.MLP_OUT, Requires.NOTHING)),
    DECODE_MASK_EXCLUDES_CURRENT("decode-mask-excludes-current",
            "the one-token decode step's causal mask is off by one: the query does not attend to its own key",
            Expected.at(When.FIRST_DECODE, Layer.FIRST, CapturePoints.ATTN_OUT, Requires.NOTHING)),
    KV_WRITE_ONE_SLOT_LATE("kv-write-one-slot-late",
            "a decode step writes its key and value one cache slot past its position, so it reads an unwritten slot at its own",
            Expected.at(When.FIRST_DECODE, Layer.FIRST, CapturePoints.K_READ, Requires.NOTHING)),
    DECODE_ROPE_POSITION_OFF_BY_ONE("decode-rope-position-off-by-one",
            "a decode step rotates its query and key to position + 1 (the count of tokens after it, not its index)",
            Expected.at(When.FIRST_DECODE, Layer.FIRST, CapturePoints.Q, Requires.NOTHING)),
    LM_HEAD_TIED("lm-head-tied",
            "the logits use the embedding matrix though the checkpoint has an lm_head of its own (tie_word_embeddings false)",
            Expected.at(When.PREFILL, Layer.NONE, CapturePoints.LOGITS, Requires.OWN_LM_HEAD));

    /** Which layer a fault first shows in: layer 0, or none (a model-level point such as the logits). */
    public enum Layer { FIRST, NONE }

    /** Which step a fault first shows at, as a rule over a case's steps (each a start position and a length). */
    public enum When {
        /** step 0, the prompt */
        PREFILL,
        /** the first one-token step after the prompt */
        FIRST_DECODE
    }

    /** What the checkpoint must have for the fault to change a number. */
    public enum Requires {
        NOTHING("nothing"),
        /** fewer KV heads than query heads, more than one (tiled and grouped differ) */
        GROUPED_KV("grouped-query attention with more than one KV head"),
        /** qwen3's per-head q_norm and k_norm */
        QK_NORM("per-head q/k norms (qwen3)"),
        /** rope_type llama3 */
        LLAMA3_ROPE("llama3 RoPE scaling"),
        /** tie_word_embeddings false */
        OWN_LM_HEAD("an lm_head of its own (tie_word_embeddings false)");

        private final String what;

        Requires(String what) { this.what = what; }

        public String what() { return what; }

        boolean holds(LlamaConfig c) {
            return switch (this) {
                case NOTHING -> true;
                case GROUPED_KV -> c.numKvHeads() > 1 && c.numKvHeads() < c.numHeads();
                case QK_NORM -> c.qkNorm();
                case LLAMA3_ROPE -> c.ropeScaling() != null;
                case OWN_LM_HEAD -> !c.tieWordEmbeddings();
            };
        }
    }

    /** A resolved expected cell: the step, the layer (null for a model-level point) and the full point name. */
    public record Cell(int step, Integer layer, String point) {}

    /**
     * Where a fault must be localized: the step {@code when} picks in a case, the layer {@code layer} picks, and the
     * point kind there. Resolved on a config and a case's steps, never by running the engine: the transformers
     * references then judge whether the engine and the harness agree with it.
     */
    public record Expected(When when, Layer layer, String kind, Requires requires) {
        static Expected at(When when, Layer layer, String kind, Requires requires) { return new Expected(when, layer, kind, requires); }

        /** Whether this config has what the fault needs to change a number. */
        public boolean appliesTo(LlamaConfig cfg) { return requires.holds(cfg); }

        /**
         * The step index in a case whose step s feeds [starts[s], starts[s]+lengths[s]), or -1 where no step fits (the
         * fault cannot show in that case).
         */
        public int stepIn(int[] starts, int[] lengths) {
            for (int s = 0; s < starts.length; s++) {
                boolean hit = switch (when) {
                    case PREFILL -> s == 0;
                    case FIRST_DECODE -> starts[s] > 0 && lengths[s] == 1;
                };
                if (hit) return s;
            }
            return -1;
        }

        /** The layer index in this config: null for a model-level point, -1 where the config cannot show the fault. */
        public Integer layerIn(LlamaConfig cfg) {
            if (!appliesTo(cfg)) return -1;
            return layer == Layer.NONE ? null : 0;
        }

        /** The full point name in this config, or null where the fault cannot show. */
        public String pointIn(LlamaConfig cfg) {
            if (!appliesTo(cfg)) return null;
            return layer == Layer.NONE ? kind : CapturePoints.layer(0, kind);
        }

        /** The cell in this config and case, or null where the fault cannot show there (the config or the steps lack what it needs). */
        public Cell cellIn(LlamaConfig cfg, int[] starts, int[] lengths) {
            int step = stepIn(starts, lengths);
            if (!appliesTo(cfg) || step < 0) return null;
            return new Cell(step, layerIn(cfg), pointIn(cfg));
        }

        @Override
        public String toString() {
            String step = switch (when) {
                case PREFILL -> "step 0";
                case FIRST_DECODE -> "the first decode step";
            };
            String where = layer == Layer.NONE ? kind : "layer 0, " + kind;
            return step + ", " + where + (requires == Requires.NOTHING ? "" : " (needs " + requires.what() + ")");
        }
    }

    private final String id;
    private final String description;
    private final Expected expected;

    LlamaFault(String id, String description, Expected expected) {
        this.id = id;
        this.description = description;
        this.expected = expected;
    }

    @Override
    public String id() { return id; }

    public String description() { return description; }

    public Expected expected() { return expected; }

    public static LlamaFault byId(String id) { return CatalogFault.byId(LlamaFault.class, "Llama-family", id); }

    /** The faults named by these ids (each must be in the catalog). */
    public static Set<LlamaFault> byIds(Collection<String> ids) { return CatalogFault.byIds(LlamaFault.class, "Llama-family", ids); }

    @Override
    public String toString() { return id; }
}
