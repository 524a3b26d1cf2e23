package dev.decodiff.harness.bench;

import dev.decodiff.harness.report.Fmt;
import dev.decodiff.harness.BadInputException;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The geometry of the random Gemma 4 checkpoint that {@code decodiff bench} synthesizes. Layers follow the real
 * pattern (every {@code period}-th layer full, and always the last), the head is tied to the embedding. The default
 * model has k_eq_v full layers with a wider head and no per-layer inputs (PLE); the real-shape presets add what their
 * released configs have: PLE, KV sharing and a double-wide MLP on shared layers (E2B), a MoE block beside the dense
 * MLP (26B-A4B, at full width but two layers deep, so it fits a laptop's disk).
 *
 * <p>A SPEC is a preset name, optionally followed by overrides: {@code default}, {@code small}, {@code e2b},
 * {@code 26b-a4b}, {@code default,layers=12}, {@code hidden=1024,ffn=4096}.
 *
 * @param period      every period-th layer is full attention (6: [S×5, F]; 5: [S×4, F])
 * @param kEqV        full layers have no v_proj (the value is the raw k projection)
 * @param globalKv    KV heads of full layers
 * @param ple         per-layer input width (0: none)
 * @param kvShared    the last kvShared layers read an earlier layer's keys and values
 * @param doubleWide  KV-shared layers have a 2× wide MLP
 * @param experts     MoE experts (0: no MoE block), of which topK run per token, each moeFfn wide
 */
public record BenchSpec(String preset, int hidden, int layers, int heads, int kvHeads, int headDim, int globalHeadDim,
                        int ffn, int vocab, int window, long seed, int period, boolean kEqV, int globalKv, int ple, int kvShared,
                        boolean doubleWide, int experts, int topK, int moeFfn) {

    /** hidden 1536, 18 layers [sliding×5, full]×3, head dims 256/512, 1 KV head, FFN 6144, 262,144 vocab: 1.06 B params. */
    public static final BenchSpec DEFAULT = new BenchSpec("default", 1536, 18, 8, 1, 256, 512, 6144, 262_144, 512, 1, 6, true, 1, 0, 0, false, 0, 0, 0);
    /** About 100 MB: a smoke test of the whole bench in seconds. */
    public static final BenchSpec SMALL = new BenchSpec("small", 512, 6, 4, 1, 128, 256, 2048, 65_536, 128, 1, 6, true, 1, 0, 0, false, 0, 0, 0);
    /** Gemma 4 E2B's text geometry: 35 layers [S×4, F]×7, PLE 256, the last 20 layers KV-shared with a 2× MLP: ~4.6 B params with the PLE table. */
    public static final BenchSpec E2B = new BenchSpec("e2b", 1536, 35, 8, 1, 256, 512, 6144, 262_144, 512, 1, 5, false, 1, 256, 20, true, 0, 0, 0);
    /**
     * Gemma 4 26B-A4B's width: hidden 2816, 16 heads, 8 KV heads (2 on k_eq_v full layers), dense FFN 2112 beside 128
     * experts of 704, top 8; two layers (one sliding, one full) instead of 30: 2.3 B params, 4.7 GB bf16.
     */
    public static final BenchSpec MOE_26B_A4B = new BenchSpec("26b-a4b", 2816, 2, 16, 8, 256, 512, 2112, 262_144, 1024, 1, 6, true, 2, 0, 0, false, 128, 8, 704);

    public static BenchSpec parse(String text) {
        if (text == null || text.isBlank()) return DEFAULT;
        String[] parts = text.strip().split(",");
        int first = 0;
        BenchSpec s = DEFAULT;
        if (!parts[0].contains("=")) {
            s = switch (parts[0].strip()) {
                case "default", "1b" -> DEFAULT;
                case "small" -> SMALL;
                case "e2b" -> E2B;
                case "26b-a4b", "moe" -> MOE_26B_A4B;
                default -> throw new BadInputException("--size: unknown preset '" + parts[0].strip()
                        + "' (presets: default, small, e2b, 26b-a4b; or key=value overrides)");
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
                if (v <= 0 && !(v == 0 && List.of("ple", "kv_shared", "experts").contains(k))) throw new NumberFormatException();
                m.put(k, v);
            } catch (NumberFormatException e) {
                throw new BadInputException("--size: '" + p + "' needs a positive integer" + (List.of("ple", "kv_shared", "experts").contains(k) ? " or 0" : ""));
            }
        }
        s = s.with(m);
        if (!s.kEqV && s.globalKv != s.kvHeads) s = s.withGlobalKv(s.kvHeads); // without k_eq_v full layers use kv
        if (s.heads % s.kvHeads != 0 || s.heads % s.globalKv != 0)
            throw new BadInputException("--size: heads=" + s.heads + " must be a multiple of kv=" + s.kvHeads + " and global_kv=" + s.globalKv);
        if (s.hidden % 16 != 0 || s.ffn % 16 != 0 || s.headDim % 2 != 0 || s.globalHeadDim % 2 != 0)
            throw new BadInputException("--size: hidden and ffn must be multiples of 16, head dims even");
        if (s.kvShared >= s.layers) throw new BadInputException("--size: kv_shared=" + s.kvShared + " must leave at least one layer with its own KV (layers=" + s.layers + ")");
        if (s.experts > 0 && (s.topK > s.experts || s.moeFfn % 16 != 0))
            throw new BadInputException("--size: top_k must be ≤ experts and moe_ffn a multiple of 16");
        return s;
    }

    private static List<String> keys() {
        return List.of("hidden", "layers", "heads", "kv", "head_dim", "global_head_dim", "ffn", "vocab", "window", "seed",
                "period", "global_kv", "ple", "kv_shared", "experts", "top_k", "moe_ffn");
    }

    private BenchSpec with(Map<String, Integer> m) {
        if (m.isEmpty()) return this;
        return new BenchSpec(preset + "+", m.getOrDefault("hidden", hidden), m.getOrDefault("layers", layers), m.getOrDefault("heads", heads),
                m.getOrDefault("kv", kvHeads), m.getOrDefault("head_dim", headDim), m.getOrDefault("global_head_dim", globalHeadDim),
                m.getOrDefault("ffn", ffn), m.getOrDefault("vocab", vocab), m.getOrDefault("window", window), m.getOrDefault("seed", (int) seed),
                m.getOrDefault("period", period), kEqV, m.getOrDefault("global_kv", globalKv), m.getOrDefault("ple", ple),
                m.getOrDefault("kv_shared", kvShared), doubleWide, m.getOrDefault("experts", experts), m.getOrDefault("top_k", topK),
                m.getOrDefault("moe_ffn", moeFfn));
    }

    private BenchSpec withGlobalKv(int g) {
        return new BenchSpec(preset, hidden, layers, heads, kvHeads, headDim, globalHeadDim, ffn, vocab, window, seed, period, kEqV, g, ple,
                kvShared, doubleWide, experts, topK, moeFfn);
    }

    /** Whether layer i is a full-attention layer: every period-th, and always the last (transformers forces it). */
    public boolean isFull(int i) { return (i + 1) % period == 0 || i == layers - 1; }

    /** Whether layer i reads an earlier layer's keys and values. */
    public boolean isShared(int i) { return kvShared > 0 && i >= layers - kvShared; }

    /** The dense MLP width of layer i. */
    public int ffn(int i) { return doubleWide && isShared(i) ? 2 * ffn : ffn; }

    /** KV heads of layer i. */
    public int kv(int i) { return isFull(i) && kEqV ? globalKv : kvHeads; }

    /**
     * A file-name-safe key naming the geometry and seed (the cache folder). The default model's key is what it was
     * before the real-shape keys existed, so a cached checkpoint stays valid.
     */
    public String key() {
        String k = Fmt.format("gemma4-h%d-l%d-nh%d-kv%d-d%d-%d-ffn%d-v%d-w%d-s%d", hidden, layers, heads, kvHeads, headDim, globalHeadDim, ffn, vocab, window, seed);
        if (period != 6 || !kEqV || globalKv != kvHeads) k += Fmt.format("-p%d-%s-gkv%d", period, kEqV ? "keqv" : "v", globalKv);
        if (ple > 0) k += Fmt.format("-ple%d", ple);
        if (kvShared > 0) k += Fmt.format("-shared%d%s", kvShared, doubleWide ? "x2" : "");
        if (experts > 0) k += Fmt.format("-moe%dk%d-%d", experts, topK, moeFfn);
        return k;
    }

    /** Parameters stored (the tied head counted once; shared layers store no k/v). */
    public long parameters() {
        long p = (long) vocab * hidden + hidden;
        if (ple > 0) p += (long) vocab * layers * ple + (long) layers * ple * hidden + ple;
        for (int i = 0; i < layers; i++) {
            boolean full = isFull(i);
            int d = full ? globalHeadDim : headDim;
            p += 2L * heads * d * hidden;                                   // q, o
            if (!isShared(i)) p += (long) (full && kEqV ? 1 : 2) * kv(i) * d * hidden; // k (and v unless k_eq_v)
            p += 3L * ffn(i) * hidden;                                      // gate, up, down
            p += 4L * hidden + (isShared(i) ? 1L : 2L) * d + 1;             // norms, q (and k) norm, layer_scalar
            if (ple > 0) p += 2L * ple * hidden + hidden;                   // per-layer gate, projection, norm
            if (experts > 0) p += (long) experts * 3 * moeFfn * hidden + (long) experts * hidden + hidden + experts + 3L * hidden;
        }
        return p;
    }

    public String describe() {
        String extra = (ple > 0 ? Fmt.format(", PLE %d", ple) : "")
                + (kvShared > 0 ? Fmt.format(", last %d layers KV-shared%s", kvShared, doubleWide ? " (MLP ×2)" : "") : "")
                + (experts > 0 ? Fmt.format(", MoE %d experts × %d, top %d", experts, moeFfn, topK) : "");
        return Fmt.format("%s: hidden %d, %d layers (sliding×%d, full)…, heads %d/%d kv (%d on full layers%s), head dims %d/%d, FFN %d, vocab %,d, window %d%s — %.2f B params, %.2f GB bf16", preset, hidden, layers, period - 1, heads, kvHeads, globalKv, kEqV ? ", k_eq_v" : "", headDim, globalHeadDim, ffn, vocab, window,
                        extra, parameters() / 1e9, parameters() * 2 / 1e9);
    }
}
