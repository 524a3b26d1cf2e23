package dev.decodiff.engine.qwen35;

import dev.decodiff.engine.CheckpointException;
import dev.decodiff.engine.CheckpointFiles;
import dev.decodiff.metal.WeightMatrix;

import java.util.ArrayList;
import java.util.List;

/**
 * All weights of a Qwen3.5 text model, checked against the config's shapes. Norm vectors are kept as transformers
 * stores them (mlx-lm's, with the +1 folded in, are unfolded at load): the (1+w) offsets of the zero-centred norms and
 * the plain weight of the gated norm are applied where they are used.
 */
public record Qwen35Weights(WeightMatrix embed, WeightMatrix lmHead, float[] finalNorm, List<Layer> layers) {

    /** One decoder layer: its two norms, its token mixer and its feed-forward block. */
    public record Layer(float[] inputNorm, float[] postAttentionNorm, Mixer mixer, Ffn ffn) {}

    public sealed interface Mixer permits Linear, Full {}

    /**
     * Gated DeltaNet weights; conv is [C, K] row-major (tap K−1 multiplies the current token), convByTap the same
     * values [K, C] (decode's conv runs down the channels a vector at a time, one tap after another).
     */
    public record Linear(WeightMatrix inProjQkv, WeightMatrix inProjZ, WeightMatrix inProjB, WeightMatrix inProjA,
                         float[] conv, float[] convByTap, float[] dtBias, float[] aLog, float[] norm, WeightMatrix outProj) implements Mixer {
        public Linear(WeightMatrix inProjQkv, WeightMatrix inProjZ, WeightMatrix inProjB, WeightMatrix inProjA,
                      float[] conv, int taps, float[] dtBias, float[] aLog, float[] norm, WeightMatrix outProj) {
            this(inProjQkv, inProjZ, inProjB, inProjA, conv, byTap(conv, taps), dtBias, aLog, norm, outProj);
        }

        private static float[] byTap(float[] conv, int taps) {
            int C = conv.length / taps;
            float[] t = new float[conv.length];
            for (int c = 0; c < C; c++)
                for (int j = 0; j < taps; j++) t[j * C + c] = conv[c * taps + j];
            return t;
        }
    }

    /** Gated full attention: q_proj holds [query | gate] per head. */
    public record Full(WeightMatrix q, WeightMatrix k, WeightMatrix v, WeightMatrix o, float[] qNorm, float[] kNorm) implements Mixer {}

    public sealed interface Ffn permits Dense, Moe {}

    public record Dense(WeightMatrix gate, WeightMatrix up, WeightMatrix down) implements Ffn {}

    /** Routed experts (gate/up/down per expert), the shared expert and its scalar sigmoid gate [H]. */
    public record Moe(WeightMatrix router, WeightMatrix[] gate, WeightMatrix[] up, WeightMatrix[] down,
                      Dense shared, float[] sharedGate) implements Ffn {}

    /** Every matrix a forward pass streams (the head, each layer's projections, MLP or experts), each once. */
    public java.util.List<WeightMatrix> streamedMatrices() {
        var out = new java.util.ArrayList<WeightMatrix>();
        out.add(lmHead);
        for (var l : layers) {
            switch (l.mixer()) {
                case Linear lin -> out.addAll(List.of(lin.inProjQkv(), lin.inProjZ(), lin.inProjB(), lin.inProjA(), lin.outProj()));
                case Full f -> out.addAll(List.of(f.q(), f.k(), f.v(), f.o()));
            }
            switch (l.ffn()) {
                case Dense d -> out.addAll(List.of(d.gate(), d.up(), d.down()));
                case Moe m -> {
                    out.addAll(List.of(m.router(), m.shared().gate(), m.shared().up(), m.shared().down()));
                    for (int e = 0; e < m.gate().length; e++) out.addAll(List.of(m.gate()[e], m.up()[e], m.down()[e]));
                }
            }
        }
        return out;
    }

    /**
     * The same weights with every streamed matrix replaced by {@code place}'s result, each distinct matrix once (the
     * tied head stays the embedding); norms and the other vectors stay as they are.
     */
    public Qwen35Weights withStreamedMatrices(java.util.function.UnaryOperator<WeightMatrix> place) {
        var placed = new java.util.IdentityHashMap<WeightMatrix, WeightMatrix>();
        java.util.function.UnaryOperator<WeightMatrix> p = m -> placed.computeIfAbsent(m, place);
        var out = new ArrayList<Layer>(layers.size());
        for (var l : layers) {
            Mixer mixer = switch (l.mixer()) {
                case Linear a -> new Linear(p.apply(a.inProjQkv()), p.apply(a.inProjZ()), p.apply(a.inProjB()), p.apply(a.inProjA()), a.conv(), a.convByTap(),
                        a.dtBias(), a.aLog(), a.norm(), p.apply(a.outProj()));
                case Full f -> new Full(p.apply(f.q()), p.apply(f.k()), p.apply(f.v()), p.apply(f.o()), f.qNorm(), f.kNorm());
            };
            Ffn ffn = switch (l.ffn()) {
                case Dense d -> dense(d, p);
                case Moe m -> {
                    var gate = new WeightMatrix[m.gate().length];
                    var up = new WeightMatrix[m.up().length];
                    var down = new WeightMatrix[m.down().length];
                    for (int e = 0; e < gate.length; e++) {
                        gate[e] = p.apply(m.gate()[e]);
                        up[e] = p.apply(m.up()[e]);
                        down[e] = p.apply(m.down()[e]);
                    }
                    yield new Moe(p.apply(m.router()), gate, up, down, dense(m.shared(), p), m.sharedGate());
                }
            };
            out.add(new Layer(l.inputNorm(), l.postAttentionNorm(), mixer, ffn));
        }
        return new Qwen35Weights(p.apply(embed), p.apply(lmHead), finalNorm, List.copyOf(out));
    }

    private static Dense dense(Dense d, java.util.function.UnaryOperator<WeightMatrix> p) {
        return new Dense(p.apply(d.gate()), p.apply(d.up()), p.apply(d.down()));
    }

    public static Qwen35Weights load(CheckpointFiles f, Qwen35Config c) {
        int H = c.hidden(), V = c.vocabSize();
        var embed = f.matrix("embed_tokens.weight", V, H);
        WeightMatrix head;
        if (c.tieWordEmbeddings()) head = embed;
        else {
            String name = f.headName();
            if (name == null)
                throw new CheckpointException(f.dir() + ": tie_word_embeddings is false but lm_head.weight is missing; add it, or set tie_word_embeddings to true");
            head = f.matrix(name, V, H);
        }
        boolean mlxLm = mlxLmLayout(f, c);
        var layers = new ArrayList<Layer>();
        for (int i = 0; i < c.numLayers(); i++) {
            String p = "layers." + i + ".";
            Mixer mixer = c.mixer(i) == Qwen35Config.Mixer.LINEAR ? linear(f, c, p + "linear_attn.", mlxLm) : full(f, c, p + "self_attn.", mlxLm);
            Ffn ffn = c.moe() ? moe(f, c, p + "mlp.") : dense(f, H, c.intermediate(), p + "mlp.");
            layers.add(new Layer(norm(f, p + "input_layernorm.weight", H, mlxLm), norm(f, p + "post_attention_layernorm.weight", H, mlxLm), mixer, ffn));
        }
        return new Qwen35Weights(embed, head, norm(f, "norm.weight", H, mlxLm), List.copyOf(layers));
    }

    /**
     * Whether the checkpoint is in mlx-lm's converted layout, told by the conv kernel's shape: mlx-lm stores it as
     * [C, K, 1] (MLX's conv weight order) where transformers stores [C, 1, K], and in the same conversion it folds the
     * +1 of the zero-centred norms (input, post-attention, final, q and k — not the gated norm) into their weights,
     * because its RMSNorm multiplies by w. mlx-lm decides from the same shape, so a file it converted says so this way.
     */
    private static boolean mlxLmLayout(CheckpointFiles f, Qwen35Config c) {
        for (int i = 0; i < c.numLayers(); i++) {
            if (c.mixer(i) != Qwen35Config.Mixer.LINEAR) continue;
            var t = f.stored().get(f.prefix() + "layers." + i + ".linear_attn.conv1d.weight");
            if (t == null) return false;
            long[] s = t.shape();
            return s.length == 3 && s[1] == c.convKernel() && s[2] == 1 && c.convKernel() != 1;
        }
        return false;
    }

    /** A zero-centred norm's weight w (the engine applies 1 + w); mlx-lm's files hold 1 + w, stored in their dtype. */
    private static float[] norm(CheckpointFiles f, String name, long n, boolean mlxLm) {
        float[] w = vec(f, name, n);
        // exact where the stored 1 + w lies in [1/2, 2] (then the engine's 1 + w is the stored value), else one fp32 rounding
        if (mlxLm) for (int j = 0; j < w.length; j++) w[j] -= 1f;
        return w;
    }

    private static Linear linear(CheckpointFiles f, Qwen35Config c, String p, boolean mlxLm) {
        int H = c.hidden(), C = c.convDim(), hv = c.linearValueHeads(), K = c.convKernel();
        // [C, 1, K] and mlx-lm's [C, K, 1] hold the taps in the same order: only the shape differs
        var conv = mlxLm ? f.get(p + "conv1d.weight", C, K, 1) : f.get(p + "conv1d.weight", C, 1, K);
        return new Linear(f.matrix(p + "in_proj_qkv.weight", C, H), f.matrix(p + "in_proj_z.weight", c.valueDim(), H),
                f.matrix(p + "in_proj_b.weight", hv, H), f.matrix(p + "in_proj_a.weight", hv, H),
                conv.toFloats(), K, vec(f, p + "dt_bias", hv), vec(f, p + "A_log", hv),
                vec(f, p + "norm.weight", c.linearValueDim()), f.matrix(p + "out_proj.weight", H, c.valueDim()));
    }

    private static Full full(CheckpointFiles f, Qwen35Config c, String p, boolean mlxLm) {
        int H = c.hidden(), d = c.headDim(), nh = c.numHeads(), nkv = c.numKvHeads();
        return new Full(f.matrix(p + "q_proj.weight", 2L * nh * d, H), f.matrix(p + "k_proj.weight", (long) nkv * d, H),
                f.matrix(p + "v_proj.weight", (long) nkv * d, H), f.matrix(p + "o_proj.weight", H, (long) nh * d),
                norm(f, p + "q_norm.weight", d, mlxLm), norm(f, p + "k_norm.weight", d, mlxLm));
    }

    private static Dense dense(CheckpointFiles f, int H, int I, String p) {
        return new Dense(f.matrix(p + "gate_proj.weight", I, H), f.matrix(p + "up_proj.weight", I, H), f.matrix(p + "down_proj.weight", H, I));
    }

    /**
     * Experts in any of three layouts: fused experts.gate_up_proj [E, 2I, H] (gate rows first) and experts.down_proj
     * [E, H, I], as the released checkpoints store them; mlx-lm's switch_mlp.{gate,up,down}_proj stacks; or
     * experts.N.{gate,up,down}_proj.weight, as transformers' save_pretrained writes them.
     */
    private static Moe moe(CheckpointFiles f, Qwen35Config c, String p) {
        int E = c.numExperts(), I = c.moeIntermediate(), H = c.hidden();
        var gate = new WeightMatrix[E];
        var up = new WeightMatrix[E];
        var down = new WeightMatrix[E];
        String x = p + "experts.";
        if (f.has(x + "gate_up_proj")) {
            var gu = f.matrix(x + "gate_up_proj", E * 2 * I, H, E, 2L * I, H);
            var dn = f.matrix(x + "down_proj", E * H, I, E, H, I);
            for (int e = 0; e < E; e++) {
                gate[e] = gu.slice(e * 2 * I, I);
                up[e] = gu.slice(e * 2 * I + I, I);
                down[e] = dn.slice(e * H, H);
            }
        } else if (f.has(p + "switch_mlp.gate_proj.weight")) {
            // mlx-lm's stacked experts: the fused gate_up_proj split into its halves, [E, I, H] each
            String sw = p + "switch_mlp.";
            var g = f.matrix(sw + "gate_proj.weight", E * I, H, E, I, H);
            var u = f.matrix(sw + "up_proj.weight", E * I, H, E, I, H);
            var dn = f.matrix(sw + "down_proj.weight", E * H, I, E, H, I);
            for (int e = 0; e < E; e++) {
                gate[e] = g.slice(e * I, I);
                up[e] = u.slice(e * I, I);
                down[e] = dn.slice(e * H, H);
            }
        } else if (f.has(x + "0.gate_proj.weight")) {
            for (int e = 0; e < E; e++) {
                var d = dense(f, H, I, x + e + ".");
                gate[e] = d.gate();
                up[e] = d.up();
                down[e] = d.down();
            }
        } else {
            throw new CheckpointException(f.dir() + ": no experts for '" + f.prefix() + x + "': expected fused " + x + "gate_up_proj and "
                    + x + "down_proj, " + x + "N.{gate,up,down}_proj.weight, or mlx-lm's " + p + "switch_mlp.{gate,up,down}_proj.weight; is num_experts right and the checkpoint complete?");
        }
        var sg = f.get(p + "shared_expert_gate.weight", 1, H).toFloats();
        return new Moe(f.matrix(p + "gate.weight", E, H), gate, up, down, dense(f, H, c.sharedIntermediate(), p + "shared_expert."), sg);
    }

    private static float[] vec(CheckpointFiles f, String name, long n) { return f.get(name, n).toFloats(); }
}
