package dev.decodiff.harness.plan;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.LayerType;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;

/** A plan as the terminal shows it ({@code decodiff plan}). */
public final class PlanText {
    private PlanText() {}

    public static void print(CapturePlan plan, PrintWriter out) {
        var m = plan.model();
        var cfg = plan.config();
        out.println("decodiff plan: " + plan.source());
        out.println("  model   " + m.modelType() + ", " + m.numHiddenLayers() + " layers"
                + (cfg == null ? "" : ", hidden " + cfg.hidden() + ", vocab " + cfg.vocabSize() + ", sliding window " + cfg.slidingWindow()));
        out.println("          config_sha256 " + m.configSha256() + (m.weightsSha256() == null ? "" : ", weights_sha256 " + m.weightsSha256()));
        int n = plan.steps().size();
        var first = plan.step(0);
        out.println("  steps   " + n + ": step 0 prefills positions 0–" + first.lastPosition() + " (T = " + first.length() + ")"
                + (n > 1 ? "; steps 1–" + (n - 1) + " decode one token each (T = 1), positions " + plan.step(1).start() + "–" + plan.step(n - 1).start() : ""));
        if (plan.tokens() != null) out.println("  tokens  feed these " + plan.tokens().size() + " token ids (teacher forcing), whatever your engine would pick: "
                + abbreviate(plan.tokens()));
        out.println("  files   one safetensors file per step, tensor keys = the point names below, F32 little-endian (dtype float32);");
        out.println("          manifest.json, and \"complete\": true written last (docs/dump-format.md; python/decodiff_dump.py writes all of it)");
        out.println();

        int decode = n > 1 ? 1 : -1;
        int w = Math.max(22, plan.points().stream().mapToInt(p -> p.name().length()).max().orElse(0) + 2);
        String head = "%-" + w + "s%-27s%-18s%-17s%-10s%s%n";
        out.printf(Locale.ROOT, head, "point", "shape", "prefill (step 0)", decode > 0 ? "decode (step 1)" : "", "needed", "holds");
        for (var p : plan.points())
            out.printf(Locale.ROOT, head, p.name(), p.form(), CapturePlan.shapeText(plan.shapeAt(p, 0)),
                    decode > 0 ? CapturePlan.shapeText(plan.shapeAt(p, decode)) : "", p.required() ? "required" : "optional", p.what());
        out.println();
        reads(plan, out);
        out.println();
        out.println("required: the residual stream (embed, ple, each layers.N.out, final_norm, logits): with it alone compare attributes");
        out.println("  each layer as a whole (at that granularity a bf16 engine's bug under ~4e-3 of a layer's output cannot be told from");
        out.println("  its rounding). Every optional point narrows attribution from the layer to its op. For a MATCH against a reference,");
        out.println("  record every point it holds (or declare your subset in the manifest's selected_points): a point the reference");
        out.println("  holds that you lack makes the verdict incomplete.");
        out.println("causal order: the rows above, step after step; the first cell over tolerance in this order is the finding.");
    }

    /** One line per group of layers whose reads hold the same kind of rows. */
    private static void reads(CapturePlan plan, PrintWriter out) {
        out.println("read-back points (attn.k_read, attn.v_read): the keys and values the step's LAST query attends over, after this");
        out.println("  step's own rows entered the cache, in position order (oldest first, never a ring buffer's slot order):");
        var groups = new LinkedHashMap<String, List<Integer>>();
        for (var p : plan.points()) {
            if (!p.kind().equals(CapturePoints.K_READ)) continue;
            var cfg = plan.config();
            String type = cfg == null ? (p.read().window() > 0 ? "sliding" : p.read().window() == 0 ? "full" : "")
                    : cfg.layer(p.layer()).type() == LayerType.SLIDING ? "sliding" : "full";
            String src = ReadWords.source(p.layer(), p.read());
            String key = (type.isEmpty() ? "" : type + ": ") + "positions " + ReadWords.positions(p.read()) + (src.isEmpty() ? "" : "; " + src);
            groups.computeIfAbsent(key, k -> new ArrayList<>()).add(p.layer());
        }
        for (var g : groups.entrySet())
            out.println("  layer" + (g.getValue().size() > 1 ? "s " : " ") + dev.decodiff.harness.report.Fmt.ranges(g.getValue(), 0) + "  " + g.getKey());
        var cfg = plan.config();
        if (cfg != null) {
            var kEqV = cfg.layers().stream().filter(l -> l.kEqV() && !l.kvShared()).map(l -> l.index()).toList();
            if (!kEqV.isEmpty())
                out.println("  k_eq_v layer" + (kEqV.size() > 1 ? "s " : " ") + dev.decodiff.harness.report.Fmt.ranges(kEqV, 0)
                        + ": the value is the raw k projection after v_norm (no k_norm, no RoPE); v_read holds those values, not the keys");
        }
        out.println("  p is the step's last position; a prefill step's reads are those of its last row.");
    }

    private static String abbreviate(List<Integer> tokens) {
        if (tokens.size() <= 12) return tokens.toString();
        return tokens.subList(0, 10).toString().replace("]", ", …, ") + tokens.getLast() + "]";
    }
}
