package dev.decodiff.harness.bench;

import dev.decodiff.harness.report.Fmt;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.function.Consumer;

/**
 * Synthesizes a random Gemma 4 checkpoint for a {@link BenchSpec} (config.json + one bf16 model.safetensors), seeded so
 * the same spec always gives the same bytes, and caches it in a folder named by the spec. The folder is built under a
 * temporary name and renamed into place, so an interrupted run never leaves a half-written checkpoint behind, and an
 * existing folder is never overwritten.
 */
public final class BenchCheckpoint {
    private static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

    private BenchCheckpoint() {}

    /** ~/.cache/decodiff/bench (or $XDG_CACHE_HOME/decodiff/bench). */
    public static Path defaultCacheRoot() {
        String xdg = System.getenv("XDG_CACHE_HOME");
        Path base = xdg != null && !xdg.isBlank() ? Path.of(xdg) : Path.of(System.getProperty("user.home"), ".cache");
        return base.resolve("decodiff").resolve("bench");
    }

    /** The cached checkpoint folder for spec under root, synthesized first if absent. */
    public static Path ensure(BenchSpec spec, Path root, Consumer<String> log) {
        return ensure(root, spec.key(), spec.describe(), config(spec), tensors(spec), spec.seed(), log);
    }

    /**
     * The cached checkpoint folder {@code key} under root (config.json and one bf16 model.safetensors of these tensors,
     * drawn from the seed), synthesized first if absent.
     */
    static Path ensure(Path root, String key, String describe, ObjectNode config, List<Tensor> tensors, long seed, Consumer<String> log) {
        Path dir = root.resolve(key);
        if (Files.isRegularFile(dir.resolve("config.json")) && Files.isRegularFile(dir.resolve("model.safetensors"))) return dir;
        if (Files.exists(dir))
            throw new UncheckedIOException(new IOException(dir + " exists but is not a complete bench checkpoint; remove it or choose another --cache"));
        try {
            Files.createDirectories(root);
            Path tmp = Files.createTempDirectory(root, key + ".partial-");
            try {
                log.accept("synthesizing " + describe + " into " + dir);
                long t0 = System.nanoTime();
                Files.write(tmp.resolve("config.json"), JSON.writeValueAsBytes(config));
                writeWeights(tensors, key, seed, tmp.resolve("model.safetensors"));
                try {
                    Files.move(tmp, dir, StandardCopyOption.ATOMIC_MOVE);
                } catch (FileAlreadyExistsException | AtomicMoveNotSupportedException e) {
                    if (!Files.isRegularFile(dir.resolve("model.safetensors"))) throw e; // else another run made it first
                } catch (IOException e) {
                    if (!Files.isRegularFile(dir.resolve("model.safetensors"))) throw e; // rename onto a non-empty folder fails
                }
                log.accept(Fmt.format("synthesized %.2f GB in %.1f s", Files.size(dir.resolve("model.safetensors")) / 1e9, (System.nanoTime() - t0) / 1e9));
            } finally {
                deleteTree(tmp);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(root + ": cannot write the bench checkpoint: " + e.getMessage(), e);
        }
        return dir;
    }

    static ObjectNode config(BenchSpec s) {
        var c = JSON.createObjectNode();
        c.put("model_type", "gemma4_text");
        c.putArray("architectures").add("Gemma4ForCausalLM");
        c.put("vocab_size", s.vocab());
        c.put("hidden_size", s.hidden());
        c.put("num_hidden_layers", s.layers());
        c.put("num_attention_heads", s.heads());
        c.put("num_key_value_heads", s.kvHeads());
        c.put("num_global_key_value_heads", s.globalKv());
        c.put("head_dim", s.headDim());
        c.put("global_head_dim", s.globalHeadDim());
        c.put("attention_k_eq_v", s.kEqV());
        c.put("intermediate_size", s.ffn());
        c.put("sliding_window", s.window());
        c.put("rms_norm_eps", 1e-6);
        c.put("final_logit_softcapping", 30.0);
        c.put("tie_word_embeddings", true);
        if (s.ple() > 0) {
            c.put("hidden_size_per_layer_input", s.ple());
            c.put("vocab_size_per_layer_input", s.vocab());
        } else {
            c.putNull("hidden_size_per_layer_input");
        }
        c.put("num_kv_shared_layers", s.kvShared());
        c.put("use_double_wide_mlp", s.doubleWide());
        if (s.experts() > 0) {
            c.put("enable_moe_block", true);
            c.put("num_experts", s.experts());
            c.put("top_k_experts", s.topK());
            c.put("moe_intermediate_size", s.moeFfn());
        }
        c.put("hidden_activation", "gelu_pytorch_tanh");
        c.put("max_position_embeddings", 131072);
        c.put("torch_dtype", "bfloat16");
        var lt = c.putArray("layer_types");
        for (int i = 0; i < s.layers(); i++) lt.add(s.isFull(i) ? "full_attention" : "sliding_attention");
        var rp = c.putObject("rope_parameters");
        rp.putObject("sliding_attention").put("rope_type", "default").put("rope_theta", 10000.0);
        rp.putObject("full_attention").put("rope_type", "proportional").put("rope_theta", 1000000.0).put("partial_rotary_factor", 0.25);
        c.put("decodiff_bench", "random weights, synthesized by decodiff bench: " + s.key());
        return c;
    }

    /** One tensor to write: its shape and how its values are drawn (uniform ±scale, or a constant). */
    record Tensor(String name, long[] shape, float scale, boolean constant) {
        long elements() {
            long n = 1;
            for (long d : shape) n *= d;
            return n;
        }
    }

    static List<Tensor> tensors(BenchSpec s) {
        var out = new ArrayList<Tensor>();
        int H = s.hidden();
        int P = s.ple(), LP = s.layers() * P;
        out.add(rand("model.embed_tokens.weight", 0.02f, s.vocab(), H));
        if (P > 0) {
            out.add(rand("model.embed_tokens_per_layer.weight", 0.02f, s.vocab(), LP));
            out.add(rand("model.per_layer_model_projection.weight", fanIn(H), LP, H));
            out.add(one("model.per_layer_projection_norm.weight", P));
        }
        for (int i = 0; i < s.layers(); i++) {
            String p = "model.layers." + i + ".";
            boolean full = s.isFull(i), shared = s.isShared(i);
            int d = full ? s.globalHeadDim() : s.headDim(), kv = s.kv(i), nh = s.heads(), ffn = s.ffn(i);
            out.add(one(p + "input_layernorm.weight", H));
            out.add(one(p + "post_attention_layernorm.weight", H));
            out.add(one(p + "pre_feedforward_layernorm.weight", H));
            out.add(one(p + "post_feedforward_layernorm.weight", H));
            out.add(one(p + "layer_scalar", 1));
            out.add(rand(p + "self_attn.q_proj.weight", fanIn(H), (long) nh * d, H));
            if (!shared) out.add(rand(p + "self_attn.k_proj.weight", fanIn(H), (long) kv * d, H));
            if (!shared && !(full && s.kEqV())) out.add(rand(p + "self_attn.v_proj.weight", fanIn(H), (long) kv * d, H));
            out.add(rand(p + "self_attn.o_proj.weight", fanIn(nh * d), H, (long) nh * d));
            out.add(one(p + "self_attn.q_norm.weight", d));
            if (!shared) out.add(one(p + "self_attn.k_norm.weight", d));
            out.add(rand(p + "mlp.gate_proj.weight", fanIn(H), ffn, H));
            out.add(rand(p + "mlp.up_proj.weight", fanIn(H), ffn, H));
            out.add(rand(p + "mlp.down_proj.weight", fanIn(ffn), H, ffn));
            if (P > 0) {
                out.add(rand(p + "per_layer_input_gate.weight", fanIn(H), P, H));
                out.add(rand(p + "per_layer_projection.weight", fanIn(P), H, P));
                out.add(one(p + "post_per_layer_input_norm.weight", H));
            }
            if (s.experts() > 0) {
                int E = s.experts(), Im = s.moeFfn();
                out.add(rand(p + "router.proj.weight", fanIn(H), E, H));
                out.add(one(p + "router.scale", H));
                out.add(one(p + "router.per_expert_scale", E));
                out.add(rand(p + "experts.gate_up_proj", fanIn(H), E, 2L * Im, H));
                out.add(rand(p + "experts.down_proj", fanIn(Im), E, H, Im));
                out.add(one(p + "pre_feedforward_layernorm_2.weight", H));
                out.add(one(p + "post_feedforward_layernorm_1.weight", H));
                out.add(one(p + "post_feedforward_layernorm_2.weight", H));
            }
        }
        out.add(one("model.norm.weight", H));
        return out;
    }

    static float fanIn(int n) { return (float) Math.sqrt(3.0 / n); } // uniform with variance 1/n

    static Tensor rand(String name, float scale, long... shape) { return new Tensor(name, shape, scale, false); }

    static Tensor one(String name, long n) { return new Tensor(name, new long[]{n}, 1f, true); }

    /** Writes the tensors as bf16 safetensors, streaming: the header first, then each tensor's values as drawn. */
    static void writeWeights(BenchSpec s, Path file) throws IOException { writeWeights(tensors(s), s.key(), s.seed(), file); }

    static void writeWeights(List<Tensor> list, String key, long seed, Path file) throws IOException {
        var header = JSON.createObjectNode();
        header.putObject("__metadata__").put("format", "pt").put("decodiff_bench", key);
        long offset = 0;
        for (var t : list) {
            var o = header.putObject(t.name());
            o.put("dtype", "BF16");
            var sh = o.putArray("shape");
            for (long d : t.shape()) sh.add(d);
            var off = o.putArray("data_offsets");
            off.add(offset);
            offset += 2 * t.elements();
            off.add(offset);
        }
        byte[] h = new ObjectMapper().writeValueAsBytes(header);
        int padded = (h.length + 7) / 8 * 8;
        var buf = ByteBuffer.allocateDirect(8 << 20).order(ByteOrder.LITTLE_ENDIAN);
        try (var ch = FileChannel.open(file, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
            buf.putLong(padded).put(h);
            for (int i = h.length; i < padded; i++) buf.put((byte) ' ');
            long rng = seed * 0x9E3779B97F4A7C15L + 0x632BE59BD9B4E5F5L;
            for (var t : list) {
                short c = bf16(t.scale());
                long n = t.elements();
                float scale = t.scale() * 2f;
                for (long i = 0; i < n; i++) {
                    if (!buf.hasRemaining()) flush(ch, buf);
                    short v;
                    if (t.constant()) v = c;
                    else {
                        // xorshift64*: fast, seeded, good enough for weights that only need to look random
                        rng ^= rng >>> 12;
                        rng ^= rng << 25;
                        rng ^= rng >>> 27;
                        long r = rng * 0x2545F4914F6CDD1DL;
                        float u = ((r >>> 40) * 0x1.0p-24f) - 0.5f; // [-0.5, 0.5)
                        v = bf16(u * scale);
                    }
                    buf.putShort(v);
                }
            }
            flush(ch, buf);
            ch.force(false);
        }
    }

    private static void flush(FileChannel ch, ByteBuffer buf) throws IOException {
        buf.flip();
        while (buf.hasRemaining()) ch.write(buf);
        buf.clear();
    }

    /** fp32 → bf16, round to nearest even (finite inputs only). */
    static short bf16(float f) {
        int b = Float.floatToRawIntBits(f);
        b += 0x7fff + ((b >>> 16) & 1);
        return (short) (b >>> 16);
    }

    private static void deleteTree(Path p) {
        if (!Files.exists(p)) return;
        try (var s = Files.walk(p)) {
            for (Path q : s.sorted(Comparator.reverseOrder()).toList()) Files.deleteIfExists(q);
        } catch (IOException ignored) {
            // a leftover temporary folder is harmless
        }
    }

    static String json(Object o) {
        try {
            return new String(JSON.writeValueAsBytes(o), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
