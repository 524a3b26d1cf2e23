package dev.decodiff.harness.arch.gemma4;

import dev.decodiff.engine.CheckpointFiles;
import dev.decodiff.engine.Gemma4Config;
import dev.decodiff.engine.ModelWeights;
import dev.decodiff.harness.arch.CheckpointDescriber;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.Locale;

/** A Gemma 4 checkpoint as `inspect` describes it: dimensions, per-layer inputs, KV sharing, MoE, RoPE, every layer. */
final class Gemma4Description implements CheckpointDescriber {
    static final Gemma4Description INSTANCE = new Gemma4Description();

    private Gemma4Description() {}

    @Override
    public Described read(Path dir) {
        var cfg = Gemma4Config.read(dir.resolve("config.json"));
        return new Described() {
            @Override public void check(CheckpointFiles files) { ModelWeights.load(files, cfg); }

            @Override public void print(PrintWriter out) { describe(out, cfg); }
        };
    }

    private static void describe(PrintWriter out, Gemma4Config cfg) {
        out.printf(Locale.ROOT, "  hidden %d, %d layers, %d query heads, vocab %,d, sliding window %d, final soft-cap %s%n",
                cfg.hidden(), cfg.numLayers(), cfg.numHeads(), cfg.vocabSize(), cfg.slidingWindow(),
                cfg.hasSoftcap() ? Float.toString(cfg.finalLogitSoftcap()) : "none");
        out.printf(Locale.ROOT, "  tied head %s, per-layer inputs %s, KV-shared layers %d, double-wide MLP %s, MoE %s%n",
                cfg.tieWordEmbeddings(), cfg.hasPle() ? cfg.pleDim() + " dims" : "no", cfg.numKvSharedLayers(), cfg.doubleWideMlp(),
                cfg.moe() ? cfg.numExperts() + " experts, top " + cfg.topKExperts() + ", " + cfg.moeIntermediate() + " wide" : "no");
        out.println("  rope  sliding " + cfg.slidingRope() + "; full " + cfg.fullRope());
        out.println();
        out.println("  layer  type     head_dim  kv_heads  k_eq_v  kv_from  ffn");
        for (var l : cfg.layers())
            out.printf(Locale.ROOT, "  %5d  %-7s  %8d  %8d  %-6s  %7s  %d%n", l.index(), l.type().toString().toLowerCase(Locale.ROOT),
                    l.headDim(), l.kvHeads(), l.kEqV() ? "yes" : "", l.kvShared() ? Integer.toString(l.kvSource()) : "", l.intermediate());
        out.println();
    }
}
