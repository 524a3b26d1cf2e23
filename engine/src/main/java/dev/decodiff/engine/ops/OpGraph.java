package dev.decodiff.engine.ops;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.Gemma4Config;

import java.util.ArrayList;
import java.util.List;

/**
 * Gemma 4's ops as a graph over the capture points: for each point, the op that makes it, the points it reads and
 * the weights it uses. {@link Gemma4Ops} computes each node; attribution, precision hypotheses and bisect's variants
 * read their inputs from here, so the three agree on what an op is.
 */
public final class OpGraph {
    private OpGraph() {}

    /** One op: the point it makes, what it does in words, and the weights it reads. */
    public record Node(String kind, String op, List<String> weights) {}

    private static final List<Node> NODES = List.of(
            new Node(CapturePoints.EMBED, "token embedding × √H", List.of("embed_tokens")),
            new Node(CapturePoints.PLE, "per-layer inputs (table × √P + normed projection of embed, × 2^-½)",
                    List.of("embed_tokens_per_layer", "per_layer_model_projection", "per_layer_projection_norm")),
            new Node(CapturePoints.Q, "input_layernorm, q_proj, q_norm, RoPE", List.of("input_layernorm", "q_proj", "q_norm")),
            new Node(CapturePoints.K, "input_layernorm, k_proj, k_norm, RoPE", List.of("input_layernorm", "k_proj", "k_norm")),
            new Node(CapturePoints.V, "input_layernorm, v_proj (k_proj on k_eq_v layers), v_norm", List.of("input_layernorm", "v_proj")),
            new Node(CapturePoints.K_READ, "the cache's keys: this step's k after the history read at the previous step", List.of()),
            new Node(CapturePoints.V_READ, "the cache's values: this step's v after the history read at the previous step", List.of()),
            new Node(CapturePoints.ATTN_OUT, "softmax(q·kᵀ)·v over the window", List.of()),
            new Node(CapturePoints.MLP_OUT, "o_proj, post_attention_layernorm, residual add, pre_feedforward_layernorm, gate/up, GELU, down",
                    List.of("o_proj", "post_attention_layernorm", "pre_feedforward_layernorm", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")),
            new Node(CapturePoints.MOE_OUT, "o_proj, post_attention_layernorm, residual add, router, top-k experts",
                    List.of("o_proj", "post_attention_layernorm", "router", "experts", "pre_feedforward_layernorm_2")),
            new Node(CapturePoints.OUT, "o_proj, post_attention_layernorm, residual adds, post_feedforward norms, per-layer input, layer_scalar",
                    List.of("o_proj", "post_attention_layernorm", "post_feedforward_layernorm", "per_layer_input_gate", "per_layer_projection", "layer_scalar")),
            new Node(CapturePoints.FINAL_NORM, "final norm", List.of("norm")),
            new Node(CapturePoints.LOGITS, "tied head, soft-cap", List.of("embed_tokens")));

    public static Node node(String kind) {
        for (var n : NODES) if (n.kind().equals(kind)) return n;
        return null;
    }

    /** The residual a layer reads: the previous layer's out, or embed for layer 0. */
    public static String layerInput(int layer) {
        return layer == 0 ? CapturePoints.EMBED : CapturePoints.layer(layer - 1, CapturePoints.OUT);
    }

    /**
     * The points of this step an op reads (besides the tokens and, for the cache reads, the previous step's read). A
     * KV-shared layer's cache reads come from its source layer.
     */
    public static List<String> inputs(Gemma4Config cfg, String point) {
        int layer = CapturePoints.layerOf(point);
        String kind = CapturePoints.kindOf(point);
        var in = new ArrayList<String>();
        if (layer < 0) {
            switch (kind) {
                case CapturePoints.PLE -> in.add(CapturePoints.EMBED);
                case CapturePoints.FINAL_NORM -> in.add(CapturePoints.layer(cfg.numLayers() - 1, CapturePoints.OUT));
                case CapturePoints.LOGITS -> in.add(CapturePoints.FINAL_NORM);
                default -> {}
            }
            return in;
        }
        var spec = cfg.layer(layer);
        int src = spec.kvSource();
        switch (kind) {
            case CapturePoints.Q, CapturePoints.K, CapturePoints.V -> in.add(layerInput(layer));
            case CapturePoints.K_READ -> in.add(spec.kvShared() ? CapturePoints.layer(src, CapturePoints.K_READ) : CapturePoints.layer(layer, CapturePoints.K));
            case CapturePoints.V_READ -> in.add(spec.kvShared() ? CapturePoints.layer(src, CapturePoints.V_READ) : CapturePoints.layer(layer, CapturePoints.V));
            case CapturePoints.ATTN_OUT -> {
                in.add(CapturePoints.layer(layer, CapturePoints.Q));
                in.add(CapturePoints.layer(layer, CapturePoints.K_READ));
                in.add(CapturePoints.layer(layer, CapturePoints.V_READ));
            }
            case CapturePoints.MLP_OUT, CapturePoints.MOE_OUT -> {
                in.add(layerInput(layer));
                in.add(CapturePoints.layer(layer, CapturePoints.ATTN_OUT));
            }
            case CapturePoints.OUT -> {
                in.add(layerInput(layer));
                in.add(CapturePoints.layer(layer, CapturePoints.ATTN_OUT));
                in.add(CapturePoints.layer(layer, CapturePoints.MLP_OUT));
                if (cfg.moe()) in.add(CapturePoints.layer(layer, CapturePoints.MOE_OUT));
                if (cfg.hasPle()) in.add(CapturePoints.PLE);
            }
            default -> {}
        }
        return in;
    }
}
