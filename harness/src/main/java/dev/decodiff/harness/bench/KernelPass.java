package dev.decodiff.harness.bench;

import dev.decodiff.metal.WeightMatrix;

import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Random;

/**
 * The engine's decode kernels alone: one matvec of every distinct matrix a decode step streams, in the order the
 * model holds them, each its own parallel call (decode fuses some of them), with fixed random activations. Its rate
 * is the ceiling the kernels set for a decode step on this machine, between the read pass (what memory gives) and the
 * step itself (which also runs everything between its matvecs: norms, attention, a recurrent state): a bench reports
 * both ratios so that a shortfall is placed in the kernels or outside them.
 */
final class KernelPass {
    private final List<WeightMatrix> matrices;
    private final float[][] xs, ys;
    private final long bytes;

    KernelPass(Iterable<WeightMatrix> streamed, long seed) {
        var seen = Collections.newSetFromMap(new IdentityHashMap<WeightMatrix, Boolean>());
        var ms = new ArrayList<WeightMatrix>();
        for (var m : streamed) if (seen.add(m)) ms.add(m);
        matrices = List.copyOf(ms);
        xs = new float[ms.size()][];
        ys = new float[ms.size()][];
        long b = 0;
        var rnd = new Random(seed);
        for (int i = 0; i < ms.size(); i++) {
            var m = ms.get(i);
            xs[i] = new float[m.cols()];
            for (int c = 0; c < xs[i].length; c++) xs[i][c] = (float) rnd.nextGaussian();
            ys[i] = new float[m.rows()];
            b += m.bytes();
        }
        bytes = b;
    }

    /** Bytes one pass reads (every matrix once: its elements, or its codes with their scales and biases). */
    long bytes() { return bytes; }

    /** One pass, in GB/s. */
    double gbs() {
        long t0 = System.nanoTime();
        for (int i = 0; i < matrices.size(); i++) matrices.get(i).matvec(xs[i], 0, ys[i], 0);
        return bytes / (double) (System.nanoTime() - t0);
    }
}
