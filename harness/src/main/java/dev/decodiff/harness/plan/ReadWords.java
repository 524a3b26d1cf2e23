package dev.decodiff.harness.plan;

/** What a read-back point holds, in words: which positions, in which order, from whose cache. */
final class ReadWords {
    private ReadWords() {}

    /** The positions read at the step's last position p, e.g. "max(0, p−7) … p (C = min(8, p+1))". */
    static String positions(ReadBack r) {
        String base = switch (r.window()) {
            case -1 -> "the positions the last query attends to";
            case 0 -> "0 … p (C = p+1)";
            default -> "max(0, p−" + (r.window() - 1) + ") … p (C = min(" + r.window() + ", p+1))";
        };
        String order = ", oldest first";
        return r.lastRows() > 0 ? base + order + ", only the last " + r.lastRows() + " kept (read_rows last:" + r.lastRows() + ")" : base + order;
    }

    /** The cache a layer's reads come from. */
    static String source(int layer, ReadBack r) {
        if (r.sourceLayer() < 0) return "";
        if (r.sourceLayer() == layer) return "its own cache";
        return "layer " + r.sourceLayer() + "'s cache (KV-shared: the same rows as layers." + r.sourceLayer() + ".attn.k_read/v_read)";
    }
}
