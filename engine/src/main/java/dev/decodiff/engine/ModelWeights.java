package dev.decodiff.engine;

import dev.decodiff.metal.TensorView;
import dev.decodiff.metal.WeightMatrix;

import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.function.UnaryOperator;

/** All weights of a Gemma 4 text model, checked against the config's shapes; matrices are views of the mapped files (see {@link WeightResidency}). */
public record ModelWeights(WeightMatrix embed, WeightMatrix lmHead, float[] finalNorm,
                           WeightMatrix pleEmbed, WeightMatrix pleModelProjection, float[] pleProjectionNorm,
                           List<LayerWeights> layers) {

    public static ModelWeights load(CheckpointFiles f, Gemma4Config c) {
        int H = c.hidden(), V = c.vocabSize(), L = c.numLayers(), P = c.pleDim(), nh = c.numHeads();
        var embed = f.matrix("embed_tokens.weight", V, H);
        WeightMatrix lmHead;
        if (c.tieWordEmbeddings()) lmHead = embed;
        else {
            String head = f.headName();
            if (head == null)
                throw new CheckpointException(f.dir() + ": tie_word_embeddings is false but lm_head.weight is missing");
            lmHead = f.matrix(head, V, H);
        }
        float[] finalNorm = vec(f, "norm.weight", H);
        WeightMatrix pleEmbed = null, pleProj = null;
        float[] pleNorm = null;
        if (P > 0) {
            pleEmbed = f.lookupTable("embed_tokens_per_layer.weight", c.pleVocab(), (long) L * P);
            pleProj = f.matrix("per_layer_model_projection.weight", (long) L * P, H);
            pleNorm = vec(f, "per_layer_projection_norm.weight", P);
        }
        var layers = new ArrayList<LayerWeights>();
        for (var spec : c.layers()) {
            String p = "layers." + spec.index() + ".";
            int d = spec.headDim(), kv = spec.kvHeads(), I = spec.intermediate();
            String a = p + "self_attn.";
            var q = f.matrix(a + "q_proj.weight", (long) nh * d, H);
            var o = f.matrix(a + "o_proj.weight", H, (long) nh * d);
            WeightMatrix k = null, v = null;
            float[] kNorm = null, kBias = null, vBias = null;
            if (!spec.kvShared()) {
                k = f.matrix(a + "k_proj.weight", (long) kv * d, H);
                kNorm = vec(f, a + "k_norm.weight", d);
                if (!spec.kEqV()) v = f.matrix(a + "v_proj.weight", (long) kv * d, H);
                if (c.attentionBias()) {
                    kBias = vec(f, a + "k_proj.bias", (long) kv * d);
                    if (!spec.kEqV()) vBias = vec(f, a + "v_proj.bias", (long) kv * d);
                }
            }
            float[] qBias = c.attentionBias() ? vec(f, a + "q_proj.bias", (long) nh * d) : null;
            float[] oBias = c.attentionBias() ? vec(f, a + "o_proj.bias", H) : null;
            var scalar = f.get(p + "layer_scalar");
            if (scalar.elementCount() != 1)
                throw new CheckpointException(f.dir() + ": '" + scalar.name() + "' has shape " + scalar.shapeString() + ", expected [1]");
            LayerWeights.Moe moe = null;
            if (c.moe()) {
                int E = c.numExperts(), Im = c.moeIntermediate();
                var gate = new WeightMatrix[E];
                var up = new WeightMatrix[E];
                var down = new WeightMatrix[E];
                // MLX (mlx-lm's SwitchGLU) splits Hugging Face's fused gate_up_proj [E, 2·Im, H] into gate_proj and
                // up_proj [E, Im, H] (the first and second half of each expert's rows) and renames down_proj
                String glu = p + "experts.switch_glu.";
                boolean mlx = !f.has(p + "experts.gate_up_proj") && f.has(glu + "gate_proj.weight");
                WeightMatrix dnAll;
                if (mlx) {
                    var gAll = f.matrix(glu + "gate_proj.weight", E * Im, H, E, Im, H);
                    var uAll = f.matrix(glu + "up_proj.weight", E * Im, H, E, Im, H);
                    dnAll = f.matrix(glu + "down_proj.weight", E * H, Im, E, H, Im);
                    for (int e = 0; e < E; e++) {
                        gate[e] = gAll.slice(e * Im, Im);
                        up[e] = uAll.slice(e * Im, Im);
                    }
                } else {
                    var guAll = f.matrix(p + "experts.gate_up_proj", E * 2 * Im, H, E, 2L * Im, H);
                    dnAll = f.matrix(p + "experts.down_proj", E * H, Im, E, H, Im);
                    for (int e = 0; e < E; e++) {
                        gate[e] = guAll.slice(e * 2 * Im, Im);
                        up[e] = guAll.slice(e * 2 * Im + Im, Im);
                    }
                }
                for (int e = 0; e < E; e++) down[e] = dnAll.slice(e * H, H);
                moe = new LayerWeights.Moe(f.matrix(p + "router.proj.weight", E, H), vec(f, p + "router.scale", H),
                        vec(f, p + "router.per_expert_scale", E), gate, up, down,
                        vec(f, p + "pre_feedforward_layernorm_2.weight", H), vec(f, p + "post_feedforward_layernorm_1.weight", H),
                        vec(f, p + "post_feedforward_layernorm_2.weight", H));
            }
            layers.add(new LayerWeights(
                    vec(f, p + "input_layernorm.weight", H), vec(f, p + "post_attention_layernorm.weight", H),
                    vec(f, p + "pre_feedforward_layernorm.weight", H), vec(f, p + "post_feedforward_layernorm.weight", H),
                    scalar.getFloat(0), q, k, v, o, qBias, kBias, vBias, oBias, vec(f, a + "q_norm.weight", d), kNorm,
                    f.matrix(p + "mlp.gate_proj.weight", I, H), f.matrix(p + "mlp.up_proj.weight", I, H),
                    f.matrix(p + "mlp.down_proj.weight", H, I), moe,
                    P > 0 ? f.matrix(p + "per_layer_input_gate.weight", P, H) : null,
                    P > 0 ? f.matrix(p + "per_layer_projection.weight", H, P) : null,
                    P > 0 ? vec(f, p + "post_per_layer_input_norm.weight", H) : null));
        }
        return new ModelWeights(embed, lmHead, finalNorm, pleEmbed, pleProj, pleNorm, List.copyOf(layers));
    }

    /**
     * The same weights with every matrix decode or prefill streams replaced by {@code place}'s result (a tied head
     * stays tied). The per-layer embedding table is looked up one row per token, not streamed, and stays as it is.
     */
    public ModelWeights withStreamedMatrices(UnaryOperator<WeightMatrix> place) {
        var placed = new IdentityHashMap<WeightMatrix, WeightMatrix>();
        UnaryOperator<WeightMatrix> p = m -> m == null ? null : placed.computeIfAbsent(m, place);
        var out = new ArrayList<LayerWeights>(layers.size());
        for (var l : layers) {
            LayerWeights.Moe moe = null;
            if (l.moe() != null) {
                var m = l.moe();
                var gate = new WeightMatrix[m.gate().length];
                var up = new WeightMatrix[m.up().length];
                var down = new WeightMatrix[m.down().length];
                for (int e = 0; e < gate.length; e++) {
                    gate[e] = p.apply(m.gate()[e]);
                    up[e] = p.apply(m.up()[e]);
                    down[e] = p.apply(m.down()[e]);
                }
                moe = new LayerWeights.Moe(p.apply(m.router()), m.routerScale(), m.perExpertScale(), gate, up, down,
                        m.preFeedforwardNorm2(), m.postFeedforwardNorm1(), m.postFeedforwardNorm2());
            }
            out.add(new LayerWeights(l.inputNorm(), l.postAttentionNorm(), l.preFeedforwardNorm(), l.postFeedforwardNorm(),
                    l.layerScalar(), p.apply(l.q()), p.apply(l.k()), p.apply(l.v()), p.apply(l.o()),
                    l.qBias(), l.kBias(), l.vBias(), l.oBias(), l.qNorm(), l.kNorm(),
                    p.apply(l.gate()), p.apply(l.up()), p.apply(l.down()), moe,
                    p.apply(l.pleGate()), p.apply(l.pleProjection()), l.plePostNorm()));
        }
        return new ModelWeights(p.apply(embed), p.apply(lmHead), finalNorm, pleEmbed, p.apply(pleModelProjection),
                pleProjectionNorm, List.copyOf(out));
    }

    private static float[] vec(CheckpointFiles f, String name, long n) {
        TensorView t = f.get(name, n);
        return t.toFloats();
    }

    /**
     * The memory a decode step streams, each matrix's data once: the LM head, the per-layer input projection and every
     * layer's matrices (an MoE layer's router and experts included); the per-layer embedding table is looked up by rows,
     * not streamed. What a bench's read ceiling is measured over.
     */
    public List<java.lang.foreign.MemorySegment> streamed() {
        var out = new ArrayList<java.lang.foreign.MemorySegment>();
        for (var m : streamedMatrices()) out.add(m.data());
        return out;
    }

    /** The matrices {@link #streamed} reads, in that order, each once. */
    public List<WeightMatrix> streamedMatrices() {
        var out = new ArrayList<WeightMatrix>();
        out.add(lmHead);
        if (pleModelProjection != null) out.add(pleModelProjection);
        for (var l : layers) {
            for (var m : new WeightMatrix[]{l.q(), l.k(), l.v(), l.o(), l.gate(), l.up(), l.down(), l.pleGate(), l.pleProjection()})
                if (m != null) out.add(m);
            if (l.moe() != null) {
                out.add(l.moe().router());
                out.addAll(List.of(l.moe().gate()));
                out.addAll(List.of(l.moe().up()));
                out.addAll(List.of(l.moe().down()));
            }
        }
        return out;
    }
}
