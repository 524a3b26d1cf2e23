package dev.decodiff.harness.arch.gemma4.selftest;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.Fault;
import dev.decodiff.engine.Gemma4Config;
import dev.decodiff.engine.LayerSpec;
import dev.decodiff.engine.LayerType;
import dev.decodiff.harness.dump.DumpManifest;
import dev.decodiff.harness.selftest.ExpectedCell;
import dev.decodiff.harness.selftest.ExpectedVariant;

import java.util.Optional;
import java.util.function.Predicate;

/**
 * Where a correct harness must localize each of Gemma 4's catalog faults ({@link Fault}) on one checkpoint and one
 * case, and the op variant bisect must name for it: the rules docs/faults.md lists, fixed from the fault's definition,
 * the checkpoint's config.json (and its layer_scalar values) and the case's manifest — never from running the engine.
 */
public final class Gemma4Expectations {
    private Gemma4Expectations() {}

    /**
     * The cell where compare and bisect must find the fault on this checkpoint and case.
     *
     * @param layerScalars each layer's layer_scalar as stored in the checkpoint (1 where absent)
     */
    public static ExpectedCell cell(Fault fault, Gemma4Config cfg, float[] layerScalars, DumpManifest m) {
        var layers = cfg.layers();
        int W = cfg.slidingWindow();
        return switch (fault) {
            case K_EQ_V_ROTATED_KEYS -> {
                var kEqV = layers.stream().filter(LayerSpec::kEqV).findFirst();
                if (kEqV.isEmpty()) yield new ExpectedCell.NotApplicable("no attention_k_eq_v layer");
                var decode = firstStep(m, st -> st.length() == 1 && st.start() > 0);
                if (decode.isEmpty()) yield new ExpectedCell.NotApplicable("no decode step");
                int l = kEqV.get().index();
                yield new ExpectedCell.Cell(decode.get(), l, CapturePoints.layer(l, CapturePoints.V_READ),
                        "the first decode step reads cached keys back as values on the first k_eq_v layer (" + l + ")");
            }
            case SLIDING_WINDOW_OFF_BY_ONE -> {
                var sliding = firstSliding(cfg);
                if (sliding.isEmpty()) yield new ExpectedCell.NotApplicable("no sliding layer");
                var st = firstStep(m, s -> s.end() - 1 >= W);
                if (st.isEmpty()) yield new ExpectedCell.NotApplicable("no position reaches the window (W = " + W + ")");
                int l = sliding.get();
                yield new ExpectedCell.Cell(st.get(), l, CapturePoints.layer(l, CapturePoints.K_READ),
                        "the first step whose last position is ≥ W = " + W + " reads W+1 keys on the first sliding layer (" + l + ")");
            }
            case RING_WRAP -> {
                var sliding = firstSliding(cfg);
                if (sliding.isEmpty()) yield new ExpectedCell.NotApplicable("no sliding layer");
                // An earlier step committed a position ≥ W (one slot too far), and this step's last position reads the ring.
                var st = firstStep(m, s -> s.start() >= W + 1 && s.length() < W);
                if (st.isEmpty()) yield new ExpectedCell.NotApplicable("no step reads the ring after a position ≥ W was committed (W = " + W + ")");
                int l = sliding.get();
                yield new ExpectedCell.Cell(st.get(), l, CapturePoints.layer(l, CapturePoints.K_READ),
                        "the first step that reads the ring after a position ≥ W = " + W + " was written one slot too far, on the first sliding layer (" + l + ")");
            }
            case DECODE_POSITION_OFF_BY_ONE -> {
                var decode = firstStep(m, s -> s.length() == 1 && s.start() > 0);
                if (decode.isEmpty()) yield new ExpectedCell.NotApplicable("no decode step");
                yield new ExpectedCell.Cell(decode.get(), 0, CapturePoints.layer(0, CapturePoints.Q), "the first decode step rotates q at p+1 from layer 0 on");
            }
            case ROPE_PROPORTIONAL_AS_PREFIX -> {
                var full = layers.stream().filter(l -> l.type() == LayerType.FULL).findFirst();
                if (full.isEmpty()) yield new ExpectedCell.NotApplicable("no full-attention layer");
                var rope = cfg.fullRope();
                if (!rope.type().equals("proportional") || rope.partialRotaryFactor() >= 1 && rope.factor() == 1)
                    yield new ExpectedCell.NotApplicable("full layers rotate every pair: prefix and proportional RoPE agree");
                var st = firstStep(m, s -> s.end() - 1 >= 1);
                if (st.isEmpty()) yield new ExpectedCell.NotApplicable("no position ≥ 1 (RoPE is the identity at 0)");
                int l = full.get().index();
                yield new ExpectedCell.Cell(st.get(), l, CapturePoints.layer(l, CapturePoints.Q),
                        "the first step with a position ≥ 1 rotates q wrongly on the first full layer (" + l + ")");
            }
            case V_NORM_MISSING -> firstOwnKv(cfg, CapturePoints.V, "values", "unnormalized");
            case GQA_MODULO -> {
                int nh = cfg.numHeads();
                var l = layers.stream().filter(s -> mixesHeads(nh, s.kvHeads())).findFirst();
                if (l.isEmpty()) yield new ExpectedCell.NotApplicable("no layer where h mod nkv ≠ h / (nh/nkv) for some head");
                int i = l.get().index();
                yield new ExpectedCell.Cell(0, i, CapturePoints.layer(i, CapturePoints.ATTN_OUT),
                        "layer " + i + " (nh " + nh + ", nkv " + l.get().kvHeads() + ") is the first where a query head reads another KV head");
            }
            case KV_SHARED_FIRST_SOURCE -> {
                Integer found = null;
                for (var s : layers) {
                    if (!s.kvShared()) continue;
                    int first = -1;
                    for (int j = 0; j < cfg.firstKvShared(); j++)
                        if (cfg.layer(j).type() == s.type()) { first = j; break; }
                    if (first >= 0 && first != s.kvSource()) { found = s.index(); break; }
                }
                if (found == null) yield new ExpectedCell.NotApplicable("no KV-shared layer whose first and last same-type sources differ");
                yield new ExpectedCell.Cell(0, found, CapturePoints.layer(found, CapturePoints.K_READ),
                        "layer " + found + " is the first shared layer whose first same-type source differs from its last (layer "
                                + cfg.layer(found).kvSource() + ")");
            }
            case LAYER_SCALAR_IGNORED -> {
                Integer l = null;
                for (int i = 0; i < layerScalars.length; i++) if (layerScalars[i] != 1f) { l = i; break; }
                if (l == null) yield new ExpectedCell.NotApplicable("every layer_scalar is 1");
                yield new ExpectedCell.Cell(0, l, CapturePoints.layer(l, CapturePoints.OUT), "layer " + l + " is the first whose layer_scalar (" + layerScalars[l] + ") is not 1");
            }
            case SOFTCAP_MISSING -> {
                if (!cfg.hasSoftcap()) yield new ExpectedCell.NotApplicable("no final_logit_softcapping");
                yield new ExpectedCell.Cell(0, null, CapturePoints.LOGITS, "the soft-cap is the last operation before the logits");
            }
            case DECODE_RECOMPUTE -> {
                if (firstStep(m, s -> s.length() == 1 && s.start() > 0).isEmpty()) yield new ExpectedCell.NotApplicable("no decode step");
                yield new ExpectedCell.NoNumericDivergence("positions-per-decode-step", "recomputing gives the right numbers; only the work per decode step shows it");
            }
            case PREFIX_REUSE_STALE_POSITION -> {
                int b = policyBoundary(W, m.promptLength());
                if (b < 1 || b >= m.promptLength()) yield new ExpectedCell.NotApplicable("the prompt is too short to reuse a prefix of it");
                yield new ExpectedCell.SelfCheckCell("prefix-reuse", b, CapturePoints.layer(0, CapturePoints.Q),
                        "the first token after the restored prefix (position " + b + ") is rotated one position early from layer 0 on");
            }
            case CACHE_DROPS_FIRST_POSITION -> {
                if (layers.stream().noneMatch(l -> l.type() == LayerType.FULL)) yield new ExpectedCell.NotApplicable("no full-attention layer");
                var reads = firstStep(m, s -> s.start() > 0);
                if (reads.isEmpty()) yield new ExpectedCell.NotApplicable("no step reads the cache");
                yield new ExpectedCell.EngineThrows(reads.get(), "the first step that reads a full layer's cache history asks for position 0, which the cache disowns");
            }
            case SLIDING_TRUNCATE -> {
                var sliding = firstSliding(cfg);
                if (sliding.isEmpty()) yield new ExpectedCell.NotApplicable("no sliding layer");
                int n = m.tokens().size(), b = policyBoundary(W, m.promptLength());
                if (n <= W || b >= n - 1) yield new ExpectedCell.NotApplicable("the ring still holds every position the cut needs");
                int l = sliding.get();
                yield new ExpectedCell.SelfCheckCell("truncate-sliding", b, CapturePoints.layer(l, CapturePoints.K_READ),
                        "the first token after the cut (position " + b + ") reads ring slots overwritten by later positions, on the first sliding layer (" + l + ")");
            }
            case ATTENTION_SCALE_INV_SQRT_D -> new ExpectedCell.Cell(0, 0, CapturePoints.layer(0, CapturePoints.ATTN_OUT),
                    "every layer scales its scores; layer 0's q, k and v are still right");
            case PREFILL_BIDIRECTIONAL -> {
                if (m.steps().isEmpty() || m.steps().getFirst().length() < 2) yield new ExpectedCell.NotApplicable("the prompt is one token: there is no later prompt position to see");
                yield new ExpectedCell.Cell(0, 0, CapturePoints.layer(0, CapturePoints.ATTN_OUT), "every prompt row but the last sees later positions from layer 0 on");
            }
            case MLP_SILU, MLP_GELU_ERF -> new ExpectedCell.Cell(0, 0, CapturePoints.layer(0, CapturePoints.MLP_OUT), "layer 0's MLP is the first to apply the activation");
            case ATTENTION_SOFTCAP_50 -> new ExpectedCell.Cell(0, 0, CapturePoints.layer(0, CapturePoints.ATTN_OUT),
                    "every layer caps its scores; layer 0's q, k and v are still right");
            case SLIDING_WINDOW_MINUS_TWO -> {
                var sliding = firstSliding(cfg);
                if (sliding.isEmpty()) yield new ExpectedCell.NotApplicable("no sliding layer");
                var st = firstStep(m, s -> s.end() - 1 >= W - 2);
                if (st.isEmpty()) yield new ExpectedCell.NotApplicable("no position reaches W−2 (W = " + W + ")");
                int l = sliding.get();
                yield new ExpectedCell.Cell(st.get(), l, CapturePoints.layer(l, CapturePoints.K_READ),
                        "the first step whose last position is ≥ W−2 = " + (W - 2) + " reads W−2 keys on the first sliding layer (" + l + ")");
            }
            case Q_NORM_MISSING -> new ExpectedCell.Cell(0, 0, CapturePoints.layer(0, CapturePoints.Q), "layer 0 is the first to norm its queries");
            case K_NORM_ONE_PLUS -> firstOwnKv(cfg, CapturePoints.K, "keys", "normed with (1+w)");
            case VALUE_AFTER_K_NORM -> {
                var kEqV = layers.stream().filter(LayerSpec::kEqV).findFirst();
                if (kEqV.isEmpty()) yield new ExpectedCell.NotApplicable("no attention_k_eq_v layer");
                int l = kEqV.get().index();
                yield new ExpectedCell.Cell(0, l, CapturePoints.layer(l, CapturePoints.V), "the first k_eq_v layer (" + l + ") is the first to take its value from the key");
            }
            case MOE_ROUTING_NOT_RENORMALISED, MOE_ROUTER_UNNORMED, MOE_EXPERT_SCALE_BY_RANK -> {
                if (!cfg.moe()) yield new ExpectedCell.NotApplicable("no MoE layers");
                yield new ExpectedCell.Cell(0, 0, CapturePoints.layer(0, CapturePoints.MOE_OUT), "layer 0's MoE block is the first to route");
            }
            case PLE_TABLE_SCALE_MISSING -> {
                if (!cfg.hasPle()) yield new ExpectedCell.NotApplicable("no per-layer inputs");
                yield new ExpectedCell.Cell(0, null, CapturePoints.PLE, "the per-layer inputs are computed once, right after the embedding");
            }
            case PLE_SLICE_LAYER_MAJOR -> {
                if (!cfg.hasPle()) yield new ExpectedCell.NotApplicable("no per-layer inputs");
                if (m.step(0).length() < 2) yield new ExpectedCell.NotApplicable("a one-token step reads the same slice either way");
                yield new ExpectedCell.Cell(0, 0, CapturePoints.layer(0, CapturePoints.OUT), "layer 0 is the first to read its per-layer input slice, in the prefill");
            }
            case PLE_COMBINE_MISSING -> {
                if (!cfg.hasPle()) yield new ExpectedCell.NotApplicable("no per-layer inputs");
                yield new ExpectedCell.Cell(0, null, CapturePoints.PLE, "the per-layer inputs are computed once, right after the embedding");
            }
            case LAYER_SCALAR_BEFORE_PLE -> {
                if (!cfg.hasPle()) yield new ExpectedCell.NotApplicable("no per-layer inputs");
                if (layerScalars[0] == 1f) yield new ExpectedCell.NotApplicable("layer 0's layer_scalar is 1");
                yield new ExpectedCell.Cell(0, 0, CapturePoints.layer(0, CapturePoints.OUT), "layer 0 is the first to add its per-layer input branch");
            }
        };
    }

    /**
     * Where the cache-policy scenarios of {@code PolicyChecks} put their restore / cut: past the sliding window when the
     * prompt allows, else at half the prompt.
     */
    private static int policyBoundary(int window, int promptLength) {
        return promptLength > window + 2 ? window + 1 : Math.max(1, promptLength / 2);
    }

    /** Step 0 at {@code kind} of the first layer that computes its own keys and values (not KV-shared). */
    private static ExpectedCell firstOwnKv(Gemma4Config cfg, String kind, String what, String how) {
        var own = cfg.layers().stream().filter(l -> !l.kvShared()).findFirst();
        if (own.isEmpty()) return new ExpectedCell.NotApplicable("no layer computes its own " + what);
        int l = own.get().index();
        return new ExpectedCell.Cell(0, l, CapturePoints.layer(l, kind), what + " enter the cache " + how + " from the first layer with its own " + what + " (" + l + ")");
    }

    private static boolean mixesHeads(int nh, int nkv) {
        int group = nh / nkv;
        for (int h = 0; h < nh; h++) if (h % nkv != h / group) return true;
        return false;
    }

    private static Optional<Integer> firstSliding(Gemma4Config cfg) {
        return cfg.layers().stream().filter(l -> l.type() == LayerType.SLIDING).map(LayerSpec::index).findFirst();
    }

    private static Optional<Integer> firstStep(DumpManifest m, Predicate<DumpManifest.Step> p) {
        for (var s : m.steps()) if (p.test(s)) return Optional.of(s.index());
        return Optional.empty();
    }

    /** The variant to name, or null for the faults bisect does not run on (no numeric divergence, cache policies, an engine that throws). */
    public static ExpectedVariant variant(Fault fault, Gemma4Config cfg, ExpectedCell cell) {
        return switch (fault) {
            case K_EQ_V_ROTATED_KEYS -> new ExpectedVariant("tensor wiring", "attn.v_read is attn.k_read");
            case SLIDING_WINDOW_OFF_BY_ONE -> new ExpectedVariant("cache window", "window off by +1");
            case RING_WRAP -> new ExpectedVariant("cache slots", "rows in the wrong slots");
            case DECODE_POSITION_OFF_BY_ONE -> new ExpectedVariant("rope", "position p+1");
            case ROPE_PROPORTIONAL_AS_PREFIX -> new ExpectedVariant("rope", "standard RoPE on a prefix");
            case V_NORM_MISSING -> new ExpectedVariant("norm", "v_norm absent");
            case GQA_MODULO -> new ExpectedVariant("attention heads", "h mod nkv");
            case KV_SHARED_FIRST_SOURCE -> cell instanceof ExpectedCell.Cell c && c.layer() != null
                    ? new ExpectedVariant("kv source", "layer " + c.layer() + " reads layer " + firstSameType(cfg, c.layer()) + "'s cache") : null;
            case LAYER_SCALAR_IGNORED -> new ExpectedVariant("layer_scalar", "not applied");
            case SOFTCAP_MISSING -> new ExpectedVariant("final soft-cap", "removed");
            case ATTENTION_SCALE_INV_SQRT_D -> new ExpectedVariant("attention", "the scores scaled by 1/√d (d = " + cfg.layer(0).headDim() + ")");
            case PREFILL_BIDIRECTIONAL -> new ExpectedVariant("attention", "no causal mask in prefill");
            case MLP_SILU -> new ExpectedVariant("mlp activation", "SiLU instead of gelu_pytorch_tanh");
            case MLP_GELU_ERF -> new ExpectedVariant("mlp activation", "exact (erf) GELU instead of gelu_pytorch_tanh");
            case ATTENTION_SOFTCAP_50 -> new ExpectedVariant("attention", "a soft-cap of 50 on the scores");
            case SLIDING_WINDOW_MINUS_TWO -> new ExpectedVariant("cache window", "window off by −2");
            case Q_NORM_MISSING -> new ExpectedVariant("norm", "q_norm absent");
            case K_NORM_ONE_PLUS -> new ExpectedVariant("norm", "k_norm with (1+w)");
            case VALUE_AFTER_K_NORM -> new ExpectedVariant("rewiring", "the value is taken after k_norm");
            case MOE_ROUTING_NOT_RENORMALISED -> new ExpectedVariant("rewiring", "the routing weights are not renormalised after top-k");
            case MOE_ROUTER_UNNORMED -> new ExpectedVariant("rewiring", "the router reads the un-normed residual");
            case MOE_EXPERT_SCALE_BY_RANK -> new ExpectedVariant("rewiring", "per_expert_scale is indexed by the expert's rank");
            case PLE_COMBINE_MISSING -> new ExpectedVariant("rewiring", "the 2^-½ combine is missing");
            case PLE_TABLE_SCALE_MISSING -> new ExpectedVariant("rewiring", "the PLE table's √P scale is missing");
            case PLE_SLICE_LAYER_MAJOR -> new ExpectedVariant("rewiring", "the gate's per-layer slice read layer-major");
            case LAYER_SCALAR_BEFORE_PLE -> new ExpectedVariant("rewiring", "layer_scalar is applied before the per-layer input branch");
            case DECODE_RECOMPUTE, PREFIX_REUSE_STALE_POSITION, SLIDING_TRUNCATE, CACHE_DROPS_FIRST_POSITION -> null;
        };
    }

    private static int firstSameType(Gemma4Config cfg, int layer) {
        for (int j = 0; j < cfg.firstKvShared(); j++) if (cfg.layer(j).type() == cfg.layer(layer).type()) return j;
        return -1;
    }
}
