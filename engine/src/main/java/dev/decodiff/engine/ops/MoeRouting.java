package dev.decodiff.engine.ops;

import java.util.ArrayList;

/**
 * The MoE router's top-k, which every architecture's MoE routes through (Gemma 4's and Qwen3.5's), and the near-tie
 * machinery local attribution uses to name a routing decision an engine of lower precision took the other way.
 */
public final class MoeRouting {
    private MoeRouting() {}

    /**
     * A routing decision at a near-tie: the router's k-th and (k+1)-th experts of a token whose probabilities are
     * nearly equal, where an engine of lower precision may pick the other one. While a RoutingTies is set on this
     * thread, each routed token is counted in order; a recording one notes each token's margin (the k-th probability
     * minus the (k+1)-th, relative to the k-th), a flipping one swaps the k-th expert for the (k+1)-th at the tokens asked.
     */
    public static final class RoutingTies {
        private final java.util.Set<Integer> flip;
        private final java.util.List<double[]> margins = new ArrayList<>();
        private int count;

        private RoutingTies(java.util.Set<Integer> flip) { this.flip = flip; }

        int[] visit(int t, float[] p, int off, int n, int[] top) {
            int i = count++;
            int k = top.length;
            boolean[] used = new boolean[n];
            for (int e : top) used[e] = true;
            int next = -1;
            for (int e = 0; e < n; e++) if (!used[e] && (next < 0 || p[off + e] > p[off + next])) next = e;
            float kth = p[off + top[k - 1]];
            margins.add(new double[]{i, kth == 0 ? Double.POSITIVE_INFINITY : (kth - p[off + next]) / kth});
            if (!flip.contains(i)) return top;
            int[] out = top.clone();
            out[k - 1] = next;
            return out;
        }
    }

    private static final ThreadLocal<RoutingTies> ROUTING = new ThreadLocal<>();

    /** Runs op and returns each routed token's margin (count, relative margin), nearest the tie first; empty without MoE. */
    public static java.util.List<double[]> routingMargins(Runnable op) {
        var r = new RoutingTies(java.util.Set.of());
        ROUTING.set(r);
        try {
            op.run();
        } finally {
            ROUTING.remove();
        }
        var m = new ArrayList<>(r.margins);
        m.sort(java.util.Comparator.comparingDouble(x -> x[1]));
        return m;
    }

    /** Runs op with the routing of the tokens of these counts taken the other way at their k-th expert. */
    public static <T> T withRoutingFlipped(java.util.Set<Integer> flip, java.util.function.Supplier<T> op) {
        ROUTING.set(new RoutingTies(flip));
        try {
            return op.get();
        } finally {
            ROUTING.remove();
        }
    }

    /**
     * The router's top-k of one token (largest first), as the routing near-tie machinery may take it: unchanged unless
     * a {@link #routingMargins} / {@link #withRoutingFlipped} run is in progress on this thread. Every architecture's
     * MoE routes through here, so one mechanism names a routing decision at a near-tie.
     */
    public static int[] routedTopK(float[] p, int off, int n, int k, int token) {
        return visit(token, p, off, n, topK(p, off, n, k));
    }

    /** A top-k the router took another way (a rewired tie rule) through the same near-tie machinery. */
    static int[] visit(int token, float[] p, int off, int n, int[] top) {
        var ties = ROUTING.get();
        return ties != null && top.length < n ? ties.visit(token, p, off, n, top) : top;
    }

    /** The indices of the k largest of p[off .. off+n), largest first (the first of equals first). */
    public static int[] topK(float[] p, int off, int n, int k) {
        int[] idx = new int[k];
        boolean[] used = new boolean[n];
        for (int j = 0; j < k; j++) {
            int best = -1;
            for (int e = 0; e < n; e++) if (!used[e] && (best < 0 || p[off + e] > p[off + best])) best = e;
            used[best] = true;
            idx[j] = best;
        }
        return idx;
    }
}
