package dev.decodiff.harness.compare.detect;

import dev.decodiff.harness.compare.CellKernel;

import java.util.Arrays;

/** Candidate head h holds the reference's head map[h] for a permutation other than the identity. */
final class HeadPermutation implements Detector {
    @Override public boolean appliesTo(String kind) { return HeadAxis.applies(kind); }

    @Override
    public Finding explain(DetectorContext ctx) {
        int d = HeadAxis.headDim(ctx);
        if (d <= 0) return null;
        var r = ctx.r();
        var c = ctx.c();
        long rows = r.dim(0);
        int heads = (int) (r.elementCount() / rows / d);
        if (heads < 2 || heads > 256) return null;
        int[] map = new int[heads];
        boolean identity = true;
        var used = new boolean[heads];
        for (int h = 0; h < heads; h++) {
            int best = -1;
            double bestRel = Double.POSITIVE_INFINITY;
            for (int g = 0; g < heads; g++) {
                final int hh = h, gg = g;
                double rel = CellKernel.relL2Gather(r, k -> (k / d) * heads * d + (long) gg * d + k % d,
                        c, k -> (k / d) * heads * d + (long) hh * d + k % d, rows * d);
                if (rel < bestRel) { bestRel = rel; best = g; }
            }
            if (bestRel > ctx.near() || used[best]) return null;
            used[best] = true;
            map[h] = best;
            if (best != h) identity = false;
        }
        if (identity) return null;
        return Finding.of("heads permuted: candidate head h holds the reference's head " + Arrays.toString(map) + "[h]");
    }
}
