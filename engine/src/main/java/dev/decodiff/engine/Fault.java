package dev.decodiff.engine;

import java.util.Arrays;

/**
 * The catalog of realistic engine bugs that can be switched on to prove the harness finds them. Each lives in
 * the real code path behind a flag that is off by default; {@link #expectation} says where a correct harness
 * must localize it (the cell is resolved per checkpoint and case by {@code ExpectedCell} in the harness).
 */
public enum Fault {
    K_EQ_V_ROTATED_KEYS("k-eq-v-rotated-keys",
            "on attention_k_eq_v layers, decode steps read the cached (normed, rotated) keys back as values",
            "step 1, the first k_eq_v layer, attn.v_read"),
    SLIDING_WINDOW_OFF_BY_ONE("sliding-window-off-by-one",
            "sliding layers attend W+1 keys instead of W",
            "the first step whose last position is ≥ W, the first sliding layer, attn.k_read"),
    RING_WRAP("ring-wrap",
            "the sliding ring writes position p into slot (p+1) mod W once p ≥ W",
            "the first step after a position ≥ W was committed, the first sliding layer, attn.k_read"),
    DECODE_POSITION_OFF_BY_ONE("decode-position-off-by-one",
            "decode steps rotate q and k at position p+1",
            "step 1, layer 0, attn.q"),
    ROPE_PROPORTIONAL_AS_PREFIX("rope-proportional-as-prefix",
            "full layers apply standard RoPE to the first partial_rotary_factor·d dims (pairs j, j+n/2; denominator n)",
            "step 0, the first full layer, attn.q"),
    V_NORM_MISSING("v-norm-missing",
            "values enter the cache without the scale-free v_norm",
            "step 0, the first layer with its own values, attn.v"),
    GQA_MODULO("gqa-modulo",
            "query head h reads KV head h mod nkv instead of h / (nh/nkv)",
            "step 0, the first layer with 1 < nkv < nh, attn.out"),
    KV_SHARED_FIRST_SOURCE("kv-shared-first-source",
            "KV-shared layers read the first, not the last, earlier layer of their type",
            "step 0, the first shared layer whose first and last sources differ, attn.k_read"),
    LAYER_SCALAR_IGNORED("layer-scalar-ignored",
            "the per-layer layer_scalar is not applied",
            "step 0, layer 0, out"),
    SOFTCAP_MISSING("softcap-missing",
            "the final logit soft-cap is skipped",
            "step 0, logits"),
    DECODE_RECOMPUTE("decode-recompute",
            "decode re-reads the whole sequence every step: right numbers, cost ∝ context",
            "no numeric divergence; positions processed per decode step > 1"),
    PREFIX_REUSE_STALE_POSITION("prefix-reuse-stale-position",
            "a session restored from a prefix snapshot resumes its RoPE positions one too early",
            "the first step after the restore, layer 0, attn.q"),
    SLIDING_TRUNCATE("sliding-truncate",
            "a sliding-window cache is cut back past its valid point and reused as if it still held those positions",
            "the first step after the cut, the first sliding layer, attn.k_read"),
    CACHE_DROPS_FIRST_POSITION("cache-drops-first-position",
            "full-attention caches count position 0 as gone once it is committed (holds p > 0 instead of p ≥ 0)",
            "the engine throws at the first decode step (\"position 0 is no longer in the cache\"), before any cell is wrong"),
    ATTENTION_SCALE_INV_SQRT_D("attention-scale-inv-sqrt-d",
            "attention scores are scaled by 1/√d (the Gemma 2/3 habit) where Gemma 4's q/k norms make the scale 1",
            "step 0, layer 0, attn.out"),
    PREFILL_BIDIRECTIONAL("prefill-bidirectional",
            "prompt rows attend to the later prompt positions too (no causal mask in prefill)",
            "step 0, layer 0, attn.out (when the prompt has more than one token)"),
    MLP_SILU("mlp-silu",
            "the MLP gates with SiLU (the Llama activation) instead of gelu_pytorch_tanh",
            "step 0, layer 0, mlp.out"),
    MLP_GELU_ERF("mlp-gelu-erf",
            "the MLP gates with exact (erf) GELU, torch's default, instead of gelu_pytorch_tanh: a bug at 1.6× the fp32 tolerance",
            "step 0, layer 0, mlp.out"),
    ATTENTION_SOFTCAP_50("attention-softcap-50",
            "attention scores are soft-capped at 50 (50·tanh(s/50), the Gemma 2 habit) where Gemma 4 has no attention soft-cap",
            "step 0, layer 0, attn.out"),
    SLIDING_WINDOW_MINUS_TWO("sliding-window-minus-two",
            "sliding layers attend W−2 keys instead of W",
            "the first step whose last position is ≥ W−2, the first sliding layer, attn.k_read"),
    Q_NORM_MISSING("q-norm-missing",
            "queries skip the per-head q_norm",
            "step 0, layer 0, attn.q"),
    K_NORM_ONE_PLUS("k-norm-one-plus",
            "keys are normed with (1+w), the Gemma 2/3 RMSNorm, where Gemma 4's k_norm multiplies by w",
            "step 0, the first layer with its own keys, attn.k"),
    VALUE_AFTER_K_NORM("value-after-k-norm",
            "on attention_k_eq_v layers the value is taken from the key after k_norm (before RoPE) instead of the raw k projection",
            "step 0, the first k_eq_v layer, attn.v"),
    MOE_ROUTING_NOT_RENORMALISED("moe-routing-not-renormalised",
            "the MoE routing weights are the full softmax's probabilities, not renormalised over the top-k experts",
            "step 0, layer 0, moe.out"),
    MOE_ROUTER_UNNORMED("moe-router-unnormed",
            "the MoE router reads the residual without its RMS norm",
            "step 0, layer 0, moe.out"),
    MOE_EXPERT_SCALE_BY_RANK("moe-expert-scale-by-rank",
            "per_expert_scale is indexed by the expert's rank in the top-k instead of its id",
            "step 0, layer 0, moe.out"),
    PLE_COMBINE_MISSING("ple-combine-missing",
            "the per-layer inputs skip the 2^-½ that averages the table and the projection",
            "step 0, ple"),
    LAYER_SCALAR_BEFORE_PLE("layer-scalar-before-ple",
            "layer_scalar multiplies the residual before the per-layer input branch is added, not after",
            "step 0, layer 0, out"),
    PLE_TABLE_SCALE_MISSING("ple-table-scale-missing",
            "the per-layer embedding table is used without its √P scale",
            "step 0, ple"),
    PLE_SLICE_LAYER_MAJOR("ple-slice-layer-major",
            "each layer's per-layer input slice is read as if ple were layer-major ([L, T, P]) where it is token-major ([T, L, P])",
            "step 0 (a prefill of more than one token), layer 0, out");

    private final String id;
    private final String description;
    private final String expectation;

    Fault(String id, String description, String expectation) {
        this.id = id;
        this.description = description;
        this.expectation = expectation;
    }

    public String id() { return id; }

    public String description() { return description; }

    public String expectation() { return expectation; }

    public static Fault byId(String id) {
        for (var f : values()) if (f.id.equals(id)) return f;
        throw new IllegalArgumentException("unknown fault '" + id + "'; the catalog has: "
                + String.join(", ", Arrays.stream(values()).map(Fault::id).toList()));
    }

    @Override
    public String toString() { return id; }
}
