package dev.decodiff.harness.bench;

import dev.decodiff.harness.BadInputException;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The geometry of the random Gemma 4 checkpoint that {@code decodiff bench} synthesizes. Layers follow the real
 * pattern (five sliding layers, then one full layer), full layers use k_eq_v with a wider head, the head is tied to
 * the embedding, and there are no per-layer inputs (PLE), like DESIGN.md §7's 1.06 B model.
 *
 * <p>A SPEC is a preset name, optionally followed by overrides: {@code default}, {@code small},
 * {@code default,layers=12}, {@code hidden=1024,ffn=4096}.
 */
public record BenchSpec(String preset, int hidden, int layers, int heads, int kvHeads, int headDim, int globalHeadDim,
                        int ffn, int vocab, int window, long seed) {

    /** DESIGN.md §7: hidden 1536, 18 layers [sliding×5, full]×3, head dims 256/512, 1 KV head, FFN 6144, 262,144 vocab. */
    public static final BenchSpec DEFAULT = new BenchSpec("default", 1536, 18, 8, 1, 256, 512, 6144, 262_144, 512, 1);
    /** About 100 MB: a smoke test of the whole bench in seconds. */
    public static final BenchSpec SMALL = new BenchSpec("small", 512, 6, 4, 1, 128, 256, 2048, 65_536, 128, 1);

    public static BenchSpec parse(String text) {
        if (text == null || text.isBlank()) return DEFAULT;
        String[] parts = text.strip().split(",");
        int first = 0;
        BenchSpec s = DEFAULT;
        if (!parts[0].contains("=")) {
            s = switch (parts[0].strip()) {
                case "default", "1b" -> DEFAULT;
                case "small" -> SMALL;
                default -> throw new BadInputException("--size: unknown preset '" + parts[0].strip() + "' (presets: default, small; or key=value overrides)");
            };
            first = 1;
        }
        var m = new LinkedHashMap<String, Integer>();
        for (int i = first; i < parts.length; i++) {
            String p = parts[i].strip();
            int eq = p.indexOf('=');
            if (eq <= 0) throw new BadInputException("--size: '" + p + "' is not key=value (keys: " + String.join(", ", keys()) + ")");
            String k = p.substring(0, eq).strip();
            if (!keys().contains(k)) throw new BadInputException("--size: unknown key '" + k + "' (keys: " + String.join(", ", keys()) + ")");
            try {
                int v = Integer.parseInt(p.substring(eq + 1).strip());
                if (v <= 0) throw new NumberFormatException();
                m.put(k, v);
            } catch (NumberFormatException e) {
                throw new BadInputException("--size: '" + p + "' needs a positive integer");
            }
        }
        s = s.with(m);
        if (s.heads % s.kvHeads != 0) throw new BadInputException("--size: heads=" + s.heads + " must be a multiple of kv=" + s.kvHeads);
        if (s.hidden % 16 != 0 || s.ffn % 16 != 0 || s.headDim % 2 != 0 || s.globalHeadDim % 2 != 0)
            throw new BadInputException("--size: hidden and ffn must be multiples of 16, head dims even");
        return s;
    }

    private static java.util.List<String> keys() {
        return java.util.List.of("hidden", "layers", "heads", "kv", "head_dim", "global_head_dim", "ffn", "vocab", "window", "seed");
    }

    private BenchSpec with(Map<String, Integer> m) {
        if (m.isEmpty()) return this;
        return new BenchSpec(preset + "+", m.getOrDefault("hidden", hidden), m.getOrDefault("layers", layers), m.getOrDefault("heads", heads),
                m.getOrDefault("kv", kvHeads), m.getOrDefault("head_dim", headDim), m.getOrDefault("global_head_dim", globalHeadDim),
                m.getOrDefault("ffn", ffn), m.getOrDefault("vocab", vocab), m.getOrDefault("window", window), m.getOrDefault("seed", (int) seed));
    }

    /** Whether layer i is a full-attention layer: every sixth, and always the last (transformers forces it). */
    public boolean isFull(int i) { return (i + 1) % 6 == 0 || i == layers - 1; }

    /** A file-name-safe key naming the geometry and seed (the cache folder). */
    public String key() {
        return "gemma4-h%d-l%d-nh%d-kv%d-d%d-%d-ffn%d-v%d-w%d-s%d".formatted(hidden, layers, heads, kvHeads, headDim, globalHeadDim, ffn, vocab, window, seed);
    }

    /** Parameters stored (the tied head counted once). */
    public long parameters() {
        long p = (long) vocab * hidden + hidden;
        for (int i = 0; i < layers; i++) {
            boolean full = isFull(i);
            int d = full ? globalHeadDim : headDim;
            p += 2L * heads * d * hidden;                      // q, o
            p += (long) (full ? 1 : 2) * kvHeads * d * hidden; // k (and v unless k_eq_v)
            p += 3L * ffn * hidden;                            // gate, up, down
            p += 4L * hidden + 2L * d + 1;                     // norms, q/k norm, layer_scalar
        }
        return p;
    }

    public String describe() {
        return "%s: hidden %d, %d layers (sliding×5, full)…, heads %d/%d kv, head dims %d/%d, FFN %d, vocab %,d, window %d — %.2f B params, %.2f GB bf16"
                .formatted(preset, hidden, layers, heads, kvHeads, headDim, globalHeadDim, ffn, vocab, window, parameters() / 1e9, parameters() * 2 / 1e9);
    }
}
