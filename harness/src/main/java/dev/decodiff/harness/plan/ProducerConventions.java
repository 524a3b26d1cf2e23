package dev.decodiff.harness.plan;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Recognizes the conventions other producers write by habit — Hugging Face module names, llama.cpp graph names, the
 * attention kernels' [heads, T, d] layout, a batch axis, a squeezed token axis — so that a dump that follows one is
 * told which it looks like and how to map it, instead of only that it is wrong.
 */
public final class ProducerConventions {
    private ProducerConventions() {}

    /** A naming convention: a pattern over tensor names and how each match maps onto a capture point. */
    private record Naming(String name, Pattern pattern, java.util.function.Function<Matcher, String> map) {}

    private static final List<Naming> NAMINGS = List.of(
            new Naming("Hugging Face module names", Pattern.compile("^(?:model\\.)?(?:language_model\\.)?(?:model\\.)?(?:embed_tokens|norm|lm_head"
                    + "|layers\\.(\\d+)(?:\\.(self_attn(?:\\.[a-z_]+)?|mlp(?:\\.[a-z_]+)?|experts|router|[a-z_]*layernorm[a-z_0-9]*))?)(?:\\.weight)?$"),
                    ProducerConventions::fromHuggingFace),
            new Naming("llama.cpp graph names", Pattern.compile("^(inp_embd|inp_scaled|result_norm|result_output|(Qcur|Kcur|Vcur|kqv_out|ffn_out|ffn_moe_out|l_out)-(\\d+))$"),
                    ProducerConventions::fromLlamaCpp));

    /**
     * One line per foreign naming convention the names follow, naming what each maps to; empty when none does.
     * {@code where}: the file the names were seen in.
     */
    public static List<String> namingProblems(String where, Iterable<String> names) {
        var out = new ArrayList<String>();
        for (var n : NAMINGS) {
            var seen = new LinkedHashMap<String, String>();
            int count = 0;
            for (String name : names) {
                Matcher m = n.pattern.matcher(name);
                if (!m.matches()) continue;
                count++;
                if (seen.size() < 4) seen.put(name, n.map.apply(m));
            }
            if (count == 0) continue;
            var pairs = new ArrayList<String>();
            for (Map.Entry<String, String> e : seen.entrySet()) pairs.add(e.getKey() + " → " + e.getValue());
            out.add(where + ": " + count + " tensor name(s) follow " + n.name + ", not decodiff's capture points; rename them: "
                    + String.join(", ", pairs) + (count > seen.size() ? ", …" : "")
                    + " (`decodiff plan` lists every point with its shape; docs/dump-format.md §3 says what each holds)");
        }
        return out;
    }

    private static String fromHuggingFace(Matcher m) {
        String all = m.group(0);
        if (m.group(1) == null) {
            if (all.contains("embed_tokens")) return "embed (its output, after the √hidden scaling)";
            if (all.contains("lm_head")) return "logits (the last position only, after soft-capping)";
            return "final_norm";
        }
        String layer = "layers." + m.group(1) + ".";
        String part = m.group(2);
        if (part == null) return layer + "out (the decoder layer's output)";
        if (part.startsWith("self_attn.q")) return layer + "attn.q (the query after q_norm and RoPE, [T, heads, head_dim])";
        if (part.startsWith("self_attn.k")) return layer + "attn.k (after k_norm and RoPE, as it enters the cache)";
        if (part.startsWith("self_attn.v")) return layer + "attn.v (after v_norm, as it enters the cache)";
        if (part.startsWith("self_attn")) return layer + "attn.out (o_proj's input, not its output)";
        if (part.startsWith("mlp")) return layer + "mlp.out (the MLP's output)";
        if (part.equals("experts") || part.equals("router")) return layer + "moe.out (the experts' output)";
        return "no capture point (norms are inside the points' ops; record the points around them)";
    }

    private static String fromLlamaCpp(Matcher m) {
        if (m.group(3) == null)
            return switch (m.group(1)) {
                case "result_norm" -> "final_norm";
                case "result_output" -> "logits (the last position only)";
                default -> "embed (after the √hidden scaling)";
            };
        String layer = "layers." + m.group(3) + ".";
        return layer + switch (m.group(2)) {
            case "Qcur" -> "attn.q (after q_norm and RoPE)";
            case "Kcur" -> "attn.k (after k_norm and RoPE)";
            case "Vcur" -> "attn.v";
            case "kqv_out" -> "attn.out";
            case "ffn_out" -> "mlp.out";
            case "ffn_moe_out" -> "moe.out";
            default -> "out";
        };
    }

    /**
     * What a tensor's wrong shape looks like, and the NumPy that maps it, or null when it fits no known convention.
     * T: the tokens the step fed; positions: p + 1.
     */
    static String shapeHint(PlannedPoint p, long[] shape, long T, long positions) {
        int rank = p.shape().size();
        if (shape.length == rank + 1 && shape[0] == 1)
            return "it looks like a leading batch axis of 1: drop it (NumPy: x[0])";
        if (!p.hasRows() && !p.isRead()) {
            if (shape.length == 2 && shape[0] == T && T > 1) return "it looks like the logits of every position [T, vocab]: keep the last row (NumPy: x[-1])";
            return null;
        }
        long rows = p.isRead() ? positions : T;
        if (rank == 3 && shape.length == 3) {
            boolean firstWrong = p.isRead() ? shape[0] > positions : shape[0] != T;
            boolean secondFits = p.isRead() ? shape[1] >= 1 && shape[1] <= positions : shape[1] == T;
            if (firstWrong && secondFits) {
                String from = p.isRead() ? "[kv_heads, C, head_dim]" : "[heads, T, head_dim]";
                return "it looks like " + from + " (the attention kernels' layout); decodiff's is " + p.form()
                        + ": swap the first two axes (NumPy: x.transpose(1, 0, 2))";
            }
        }
        if (rank == 3 && shape.length == 2 && (p.isRead() ? shape[0] <= rows : shape[0] == T))
            return "it looks like the heads flattened into one axis; split it: " + p.form() + " (NumPy: x.reshape(x.shape[0], heads, head_dim))";
        if (shape.length == rank - 1 && T == 1 && !p.isRead())
            return "it looks like the token axis was squeezed away at this one-token step; keep it (NumPy: x[None])";
        return null;
    }
}
