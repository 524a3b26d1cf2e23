package dev.decodiff.engine.llama;

import dev.decodiff.engine.CheckpointException;
import dev.decodiff.engine.CheckpointFiles;
import dev.decodiff.metal.WeightMatrix;

import java.util.ArrayList;
import java.util.List;

/** All weights of a Llama-family model, checked against the config's shapes; biases and q/k norms are null where absent. */
public record LlamaWeights(WeightMatrix embed, WeightMatrix lmHead, float[] finalNorm, List<Layer> layers) {

    /** One decoder layer: attention (with its optional biases and qwen3's per-head norms) and the SwiGLU MLP. */
    public record Layer(float[] inputNorm, float[] postAttentionNorm,
                        WeightMatrix q, WeightMatrix k, WeightMatrix v, WeightMatrix o,
                        float[] qBias, float[] kBias, float[] vBias, float[] oBias, float[] qNorm, float[] kNorm,
                        WeightMatrix gate, WeightMatrix up, WeightMatrix down, float[] gateBias, float[] upBias, float[] downBias) {}

    public static LlamaWeights load(CheckpointFiles f, LlamaConfig c) {
        int H = c.hidden(), V = c.vocabSize(), d = c.headDim(), I = c.intermediate();
        int qDim = c.numHeads() * d, kvDim = c.numKvHeads() * d;
        var embed = f.matrix("embed_tokens.weight", V, H);
        WeightMatrix head;
        if (c.tieWordEmbeddings()) head = embed;
        else {
            String name = f.headName();
            if (name == null)
                throw new CheckpointException(f.dir() + ": tie_word_embeddings is false but lm_head.weight is missing; add it, or set tie_word_embeddings to true");
            head = f.matrix(name, V, H);
        }
        var layers = new ArrayList<Layer>();
        boolean ab = c.attentionBias(), mb = c.mlpBias();
        for (int i = 0; i < c.numLayers(); i++) {
            String p = "layers." + i + ".", a = p + "self_attn.", m = p + "mlp.";
            layers.add(new Layer(vec(f, p + "input_layernorm.weight", H), vec(f, p + "post_attention_layernorm.weight", H),
                    f.matrix(a + "q_proj.weight", qDim, H), f.matrix(a + "k_proj.weight", kvDim, H),
                    f.matrix(a + "v_proj.weight", kvDim, H), f.matrix(a + "o_proj.weight", H, qDim),
                    ab ? vec(f, a + "q_proj.bias", qDim) : null, ab ? vec(f, a + "k_proj.bias", kvDim) : null,
                    ab ? vec(f, a + "v_proj.bias", kvDim) : null, ab ? vec(f, a + "o_proj.bias", H) : null,
                    c.qkNorm() ? vec(f, a + "q_norm.weight", d) : null, c.qkNorm() ? vec(f, a + "k_norm.weight", d) : null,
                    f.matrix(m + "gate_proj.weight", I, H), f.matrix(m + "up_proj.weight", I, H), f.matrix(m + "down_proj.weight", H, I),
                    mb ? vec(f, m + "gate_proj.bias", I) : null, mb ? vec(f, m + "up_proj.bias", I) : null, mb ? vec(f, m + "down_proj.bias", H) : null));
        }
        return new LlamaWeights(embed, head, vec(f, "norm.weight", H), List.copyOf(layers));
    }

    private static float[] vec(CheckpointFiles f, String name, long n) { return f.get(name, n).toFloats(); }
}
