package dev.decodiff.harness.arch.gemma4.sweep;

import dev.decodiff.engine.Gemma4Config;
import dev.decodiff.engine.LayerType;

import java.util.ArrayList;
import java.util.List;
import java.util.TreeMap;

/**
 * The lengths at which a cache's bookkeeping changes, read off the checkpoint's config and the engine's options, not
 * listed by hand: the sliding window's edges W−1, W, W+1; each ring wrap k·W and the slot after it; the edges of the
 * chunks a prompt is split into (k·c, k·c+1 for each chunk size c, n_ubatch included); the cache's capacity. The
 * layer edges (first sliding and full layer, the first KV-shared layer and the layer it reads) are not lengths; they
 * are reported with the boundaries, as where a localized cell is expected to appear first.
 */
public final class Boundaries {
    private Boundaries() {}

    /**
     * @param chunks   chunk sizes the sweep's schedules use and the engine's ubatch size (0s ignored)
     * @param capacity the cache's capacity in positions, 0 when it grows on demand
     * @param max      the longest length swept (a ring wrap past it is left out)
     */
    public static List<Boundary> of(Gemma4Config cfg, List<Integer> chunks, int capacity, int max) {
        var out = new TreeMap<Integer, Boundary>();
        int w = cfg.slidingWindow();
        boolean sliding = cfg.layers().stream().anyMatch(l -> l.type() == LayerType.SLIDING);
        if (sliding && w > 0) {
            add(out, w - 1, "W−1", "the last length a sliding layer sees whole (W=" + w + ")");
            add(out, w, "W", "the first position a sliding window drops (W=" + w + ")");
            add(out, w + 1, "W+1", "the ring's first overwritten slot is read");
            for (int k = 2; k * w <= max; k++) {
                add(out, k * w, k + "·W", "ring wrap " + k);
                add(out, k * w + 1, k + "·W+1", "the slot after ring wrap " + k);
            }
        }
        for (int c : chunks) {
            if (c < 2) continue;
            for (int k = 1; k <= 2 && k * c <= max; k++) {
                add(out, k * c, k + "·" + c, "a prompt of whole chunks of " + c);
                add(out, k * c + 1, k + "·" + c + "+1", "one token past " + k + " chunk" + (k == 1 ? "" : "s") + " of " + c);
            }
        }
        if (capacity > 0) {
            // a family reaches at most L+4 positions: at this L its last ones are the cache's last cells
            add(out, capacity - 4, "capacity−4", "a scenario's last positions are the last cells of a cache of " + capacity);
        }
        return out.values().stream().filter(b -> b.length() >= 2 && b.length() <= Math.max(max, capacity - 4)).toList();
    }

    /** The layers where a cell is expected to appear first, by what changes there. */
    public static List<String> layerEdges(Gemma4Config cfg) {
        var out = new ArrayList<String>();
        cfg.layers().stream().filter(l -> l.type() == LayerType.SLIDING).findFirst().ifPresent(l -> out.add("first sliding layer " + l.index()));
        cfg.layers().stream().filter(l -> l.type() == LayerType.FULL).findFirst().ifPresent(l -> out.add("first full layer " + l.index()));
        cfg.layers().stream().filter(l -> l.kvShared()).findFirst()
                .ifPresent(l -> out.add("first KV-shared layer " + l.index() + " (reads layer " + l.kvSource() + ")"));
        return out;
    }

    private static void add(TreeMap<Integer, Boundary> out, int len, String label, String why) {
        out.putIfAbsent(len, new Boundary(len, label, why));
    }
}
