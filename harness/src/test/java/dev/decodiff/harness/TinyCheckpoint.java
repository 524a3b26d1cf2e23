package dev.decodiff.harness;

import dev.decodiff.metal.SafetensorsWriter;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * A minute random-weight Gemma 4 text checkpoint in Hugging Face layout, made in Java so the harness's live path
 * (engine runs, dump, run, observer effect) is tested without the Python-made bundled checkpoints: hidden 16,
 * 3 layers (sliding, sliding, full with k_eq_v), 2 query heads, 1 KV head, window 4, soft-cap, tied head.
 */
public final class TinyCheckpoint {
    public static final int V = 64, H = 16, NH = 2, D_SLIDING = 8, D_FULL = 16, I = 32, WINDOW = 4;

    private TinyCheckpoint() {}

    public static Path write(Path dir) {
        try {
            Files.createDirectories(dir);
            Files.writeString(dir.resolve("config.json"), """
                    {"model_type": "gemma4_text", "vocab_size": 64, "hidden_size": 16, "num_hidden_layers": 3,
                     "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8, "global_head_dim": 16,
                     "attention_k_eq_v": true, "num_global_key_value_heads": 1, "intermediate_size": 32,
                     "sliding_window": 4, "rms_norm_eps": 1e-6, "final_logit_softcapping": 30.0,
                     "tie_word_embeddings": true, "hidden_size_per_layer_input": 0,
                     "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
                     "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                         "full_attention": {"rope_type": "proportional", "rope_theta": 1000000.0, "partial_rotary_factor": 0.25}}}
                    """);
            var rnd = new SplittableRandom(42);
            var w = new SafetensorsWriter();
            w.add("model.embed_tokens.weight", new long[]{V, H}, rand(rnd, V * H, 1.0));
            w.add("model.norm.weight", new long[]{H}, near1(rnd, H));
            for (int l = 0; l < 3; l++) {
                boolean full = l == 2;
                int d = full ? D_FULL : D_SLIDING;
                String p = "model.layers." + l + ".";
                String a = p + "self_attn.";
                double s = 1 / Math.sqrt(H);
                w.add(a + "q_proj.weight", new long[]{NH * d, H}, rand(rnd, NH * d * H, s));
                w.add(a + "k_proj.weight", new long[]{d, H}, rand(rnd, d * H, s));
                if (!full) w.add(a + "v_proj.weight", new long[]{d, H}, rand(rnd, d * H, s));
                w.add(a + "o_proj.weight", new long[]{H, NH * d}, rand(rnd, H * NH * d, 1 / Math.sqrt(NH * d)));
                w.add(a + "q_norm.weight", new long[]{d}, near1(rnd, d));
                w.add(a + "k_norm.weight", new long[]{d}, near1(rnd, d));
                w.add(p + "layer_scalar", new long[]{1}, new float[]{0.7f + 0.1f * l});
                for (String n : new String[]{"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"})
                    w.add(p + n + ".weight", new long[]{H}, near1(rnd, H));
                w.add(p + "mlp.gate_proj.weight", new long[]{I, H}, rand(rnd, I * H, s));
                w.add(p + "mlp.up_proj.weight", new long[]{I, H}, rand(rnd, I * H, s));
                w.add(p + "mlp.down_proj.weight", new long[]{H, I}, rand(rnd, H * I, 1 / Math.sqrt(I)));
            }
            w.write(dir.resolve("model.safetensors"), Map.of("format", "pt"));
            return dir;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static float[] rand(SplittableRandom r, int n, double scale) {
        var a = new float[n];
        for (int i = 0; i < n; i++) a[i] = (float) ((r.nextDouble() * 2 - 1) * scale * Math.sqrt(3));
        return a;
    }

    static float[] near1(SplittableRandom r, int n) {
        var a = new float[n];
        for (int i = 0; i < n; i++) a[i] = (float) (1 + 0.2 * (r.nextDouble() - 0.5));
        return a;
    }
}
