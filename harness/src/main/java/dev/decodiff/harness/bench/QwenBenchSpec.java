package dev.decodiff.harness.bench;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.report.Fmt;

import java.util.ArrayList;
import java.util.List;

/**
 * The geometry of a random Qwen3.5 dense text decoder that {@code decodiff bench --size qwen35-…} synthesizes: layers
 * in the released pattern (every {@code interval}-th a gated full-attention layer, the rest Gated DeltaNet), a
 * depthwise causal conv of 4 taps, partial RoPE over a quarter of each 256-wide head, a SiLU MLP, the tied head.
 *
 * <p>A SPEC is a preset name, optionally followed by overrides: {@code qwen35-0.8b}, {@code qwen35-0.8b,layers=8}
 * (keys: hidden, layers, ffn, vocab, seed).
 */
public record QwenBenchSpec(String preset, int hidden, int layers, int interval, int heads, int kvHeads, int headDim,
                            int linearKeyHeads, int linearValueHeads, int linearKeyDim, int linearValueDim, int ffn, int vocab, long seed) {

    /**
     * Qwen3.5-0.8B's text decoder (Qwen/Qwen3.5-0.8B config.json, text_config): hidden 1024, 24 layers [linear×3,
     * full]×6, 8 query heads and 2 KV heads of 256, 16 linear key and 16 value heads of 128, MLP 3584, vocabulary
     * 248,320, tied embeddings: 0.75 B parameters (the vision tower and MTP head are not part of the text decoder).
     */
    public static final QwenBenchSpec QWEN35_08B = new QwenBenchSpec("qwen35-0.8b", 1024, 24, 4, 8, 2, 256, 16, 16, 128, 128, 3584, 248_320, 1);
    /** A few MB with every kind of layer (and every width a multiple of 64, so the MLX conversion packs them all): the smoke test's. */
    public static final QwenBenchSpec QWEN35_TINY = new QwenBenchSpec("qwen35-tiny", 128, 4, 4, 4, 2, 64, 2, 4, 32, 32, 256, 4096, 1);

    /** Whether a --size SPEC names a Qwen3.5 preset. */
    public static boolean names(String text) {
        return text != null && text.strip().toLowerCase(java.util.Locale.ROOT).startsWith("qwen35");
    }

    public static QwenBenchSpec parse(String text) {
        String[] parts = text.strip().split(",");
        var s = switch (parts[0].strip().toLowerCase(java.util.Locale.ROOT)) {
            case "qwen35-0.8b", "qwen35" -> QWEN35_08B;
            case "qwen35-tiny" -> QWEN35_TINY;
            default -> throw new BadInputException("--size: unknown Qwen3.5 preset '" + parts[0].strip() + "' (presets: qwen35-0.8b, qwen35-tiny)");
        };
        for (int i = 1; i < parts.length; i++) {
            String p = parts[i].strip();
            int eq = p.indexOf('=');
            if (eq <= 0) throw new BadInputException("--size: '" + p + "' is not key=value (keys: hidden, layers, ffn, vocab, seed)");
            String k = p.substring(0, eq).strip();
            int v;
            try {
                v = Integer.parseInt(p.substring(eq + 1).strip());
                if (v <= 0) throw new NumberFormatException();
            } catch (NumberFormatException e) {
                throw new BadInputException("--size: '" + p + "' needs a positive integer");
            }
            s = switch (k) {
                case "hidden" -> new QwenBenchSpec(s.preset + "+", v, s.layers, s.interval, s.heads, s.kvHeads, s.headDim, s.linearKeyHeads,
                        s.linearValueHeads, s.linearKeyDim, s.linearValueDim, s.ffn, s.vocab, s.seed);
                case "layers" -> new QwenBenchSpec(s.preset + "+", s.hidden, v, s.interval, s.heads, s.kvHeads, s.headDim, s.linearKeyHeads,
                        s.linearValueHeads, s.linearKeyDim, s.linearValueDim, s.ffn, s.vocab, s.seed);
                case "ffn" -> new QwenBenchSpec(s.preset + "+", s.hidden, s.layers, s.interval, s.heads, s.kvHeads, s.headDim, s.linearKeyHeads,
                        s.linearValueHeads, s.linearKeyDim, s.linearValueDim, v, s.vocab, s.seed);
                case "vocab" -> new QwenBenchSpec(s.preset + "+", s.hidden, s.layers, s.interval, s.heads, s.kvHeads, s.headDim, s.linearKeyHeads,
                        s.linearValueHeads, s.linearKeyDim, s.linearValueDim, s.ffn, v, s.seed);
                case "seed" -> new QwenBenchSpec(s.preset + "+", s.hidden, s.layers, s.interval, s.heads, s.kvHeads, s.headDim, s.linearKeyHeads,
                        s.linearValueHeads, s.linearKeyDim, s.linearValueDim, s.ffn, s.vocab, v);
                default -> throw new BadInputException("--size: unknown key '" + k + "' for a Qwen3.5 preset (keys: hidden, layers, ffn, vocab, seed)");
            };
        }
        if (s.hidden % 64 != 0 || s.ffn % 64 != 0)
            throw new BadInputException("--size: hidden and ffn must be multiples of 64 (the MLX conversion's group)");
        if (s.vocab < 4) throw new BadInputException("--size: vocab must be at least 4");
        return s;
    }

    /** Whether layer i is a full-attention layer (the rest are Gated DeltaNet), as transformers derives layer_types. */
    public boolean isFull(int i) { return (i + 1) % interval == 0; }

    int keyDim() { return linearKeyHeads * linearKeyDim; }

    int valueDim() { return linearValueHeads * linearValueDim; }

    int convDim() { return 2 * keyDim() + valueDim(); }

    /** Bytes of every Gated DeltaNet layer's recurrent state (fp32, Hv × dk × dv a layer), which decode reads twice and writes once per token. */
    public long recurrentStateBytes() {
        long n = 0;
        for (int i = 0; i < layers; i++) if (!isFull(i)) n += 4L * linearValueHeads * linearKeyDim * linearValueDim;
        return n;
    }

    /** A file-name-safe key naming the geometry and seed (the cache folder). */
    public String key() {
        return Fmt.format("qwen35-h%d-l%d-i%d-nh%d-kv%d-d%d-lk%d-lv%d-dk%d-dv%d-ffn%d-v%d-s%d", hidden, layers, interval, heads, kvHeads, headDim,
                linearKeyHeads, linearValueHeads, linearKeyDim, linearValueDim, ffn, vocab, seed);
    }

    public long parameters() {
        long p = (long) vocab * hidden + hidden;
        for (int i = 0; i < layers; i++) {
            p += 2L * hidden + 3L * ffn * hidden;
            if (isFull(i)) p += (2L * heads * headDim + 2L * kvHeads * headDim) * hidden + (long) hidden * heads * headDim + 2L * headDim;
            else p += (long) convDim() * hidden + (long) valueDim() * hidden + 2L * linearValueHeads * hidden + (long) hidden * valueDim()
                    + 4L * convDim() + 2L * linearValueHeads + linearValueDim;
        }
        return p;
    }

    public String describe() {
        return Fmt.format("%s: Qwen3.5 dense, hidden %d, %d layers [linear×%d, full]…, full attention %d/%d heads of %d (rotary 25%%), "
                        + "Gated DeltaNet %d key / %d value heads of %d/%d, conv 4, MLP %d, vocab %,d, tied — %.2f B params, %.2f GB bf16",
                preset, hidden, layers, interval - 1, heads, kvHeads, headDim, linearKeyHeads, linearValueHeads, linearKeyDim, linearValueDim, ffn, vocab,
                parameters() / 1e9, parameters() * 2 / 1e9);
    }

    /** The qwen3_5_text config.json, with the real checkpoints' RoPE (θ 1e7, partial 0.25) and layer_types spelled out. */
    ObjectNode config() {
        var c = new ObjectMapper().createObjectNode();
        c.put("model_type", "qwen3_5_text");
        c.putArray("architectures").add("Qwen3_5ForCausalLM");
        c.put("vocab_size", vocab);
        c.put("hidden_size", hidden);
        c.put("intermediate_size", ffn);
        c.put("num_hidden_layers", layers);
        c.put("num_attention_heads", heads);
        c.put("num_key_value_heads", kvHeads);
        c.put("head_dim", headDim);
        c.put("linear_num_key_heads", linearKeyHeads);
        c.put("linear_num_value_heads", linearValueHeads);
        c.put("linear_key_head_dim", linearKeyDim);
        c.put("linear_value_head_dim", linearValueDim);
        c.put("linear_conv_kernel_dim", 4);
        c.put("full_attention_interval", interval);
        c.put("rms_norm_eps", 1e-6);
        c.put("hidden_act", "silu");
        c.put("attention_bias", false);
        c.put("tie_word_embeddings", true);
        c.put("max_position_embeddings", 262_144);
        c.put("torch_dtype", "bfloat16");
        var lt = c.putArray("layer_types");
        for (int i = 0; i < layers; i++) lt.add(isFull(i) ? "full_attention" : "linear_attention");
        c.putObject("rope_parameters").put("rope_type", "default").put("rope_theta", 10_000_000.0).put("partial_rotary_factor", 0.25);
        c.put("decodiff_bench", "random weights, synthesized by decodiff bench: " + key());
        return c;
    }

    /** The tensors in transformers' names: matrices uniform with variance 1/fan-in, norm offsets 0, the gated norm 1. */
    List<BenchCheckpoint.Tensor> tensors() {
        var out = new ArrayList<BenchCheckpoint.Tensor>();
        int H = hidden;
        out.add(BenchCheckpoint.rand("model.embed_tokens.weight", 0.02f, vocab, H));
        for (int i = 0; i < layers; i++) {
            String p = "model.layers." + i + ".";
            out.add(zero(p + "input_layernorm.weight", H));
            out.add(zero(p + "post_attention_layernorm.weight", H));
            if (isFull(i)) {
                String a = p + "self_attn.";
                out.add(BenchCheckpoint.rand(a + "q_proj.weight", BenchCheckpoint.fanIn(H), 2L * heads * headDim, H));
                out.add(BenchCheckpoint.rand(a + "k_proj.weight", BenchCheckpoint.fanIn(H), (long) kvHeads * headDim, H));
                out.add(BenchCheckpoint.rand(a + "v_proj.weight", BenchCheckpoint.fanIn(H), (long) kvHeads * headDim, H));
                out.add(BenchCheckpoint.rand(a + "o_proj.weight", BenchCheckpoint.fanIn(heads * headDim), H, (long) heads * headDim));
                out.add(zero(a + "q_norm.weight", headDim));
                out.add(zero(a + "k_norm.weight", headDim));
            } else {
                String a = p + "linear_attn.";
                out.add(BenchCheckpoint.rand(a + "in_proj_qkv.weight", BenchCheckpoint.fanIn(H), convDim(), H));
                out.add(BenchCheckpoint.rand(a + "in_proj_z.weight", BenchCheckpoint.fanIn(H), valueDim(), H));
                out.add(BenchCheckpoint.rand(a + "in_proj_b.weight", BenchCheckpoint.fanIn(H), linearValueHeads, H));
                out.add(BenchCheckpoint.rand(a + "in_proj_a.weight", BenchCheckpoint.fanIn(H), linearValueHeads, H));
                out.add(BenchCheckpoint.rand(a + "conv1d.weight", BenchCheckpoint.fanIn(4), convDim(), 1, 4));
                out.add(zero(a + "dt_bias", linearValueHeads));
                out.add(zero(a + "A_log", linearValueHeads));
                out.add(BenchCheckpoint.one(a + "norm.weight", linearValueDim));
                out.add(BenchCheckpoint.rand(a + "out_proj.weight", BenchCheckpoint.fanIn(valueDim()), H, valueDim()));
            }
            out.add(BenchCheckpoint.rand(p + "mlp.gate_proj.weight", BenchCheckpoint.fanIn(H), ffn, H));
            out.add(BenchCheckpoint.rand(p + "mlp.up_proj.weight", BenchCheckpoint.fanIn(H), ffn, H));
            out.add(BenchCheckpoint.rand(p + "mlp.down_proj.weight", BenchCheckpoint.fanIn(ffn), H, ffn));
        }
        out.add(zero("model.norm.weight", H));
        return out;
    }

    private static BenchCheckpoint.Tensor zero(String name, long n) { return new BenchCheckpoint.Tensor(name, new long[]{n}, 0f, true); }
}
