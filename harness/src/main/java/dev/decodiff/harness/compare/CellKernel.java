package dev.decodiff.harness.compare;

import dev.decodiff.metal.DType;
import dev.decodiff.metal.TensorView;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;

/**
 * One pass over a (reference, candidate) pair with Vector API kernels: ‖r‖², ‖c‖², ‖c−r‖², c·r and max |c−r|.
 * Sums run in float lanes inside blocks of {@value #BLOCK} elements and in double across blocks, which keeps rel L2
 * exact to a few ulps at 1e-7 and tensors of any size. Non-finite values poison the sums, so only then is the data
 * scanned again to count them; the index of max |Δ| is found by rescanning the one block that held it.
 */
public final class CellKernel {
    private static final VectorSpecies<Float> S = FloatVector.SPECIES_PREFERRED;
    private static final int BLOCK = 4096;
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    private CellKernel() {}

    /** Raw sums of one cell; both tensors hold n elements. */
    public record Sums(long n, double rr, double cc, double dd, double cr, double maxAbs, long maxIndex,
                       long nonFiniteRef, long nonFiniteCand) {}

    public static Sums sums(TensorView r, TensorView c) {
        long n = r.elementCount();
        if (c.elementCount() != n) throw new IllegalArgumentException("element counts differ: " + n + " vs " + c.elementCount());
        Sums s;
        if (r.dtype() == DType.F32 && c.dtype() == DType.F32) {
            try (var arena = java.lang.foreign.Arena.ofConfined()) {
                s = vectorSums(vectorable(r.data(), arena), vectorable(c.data(), arena), n);
            }
        } else {
            s = scalarSums(r, c, n);
        }
        if (!(Double.isFinite(s.rr) && Double.isFinite(s.cc) && Double.isFinite(s.dd) && Double.isFinite(s.cr)
                && Double.isFinite(s.maxAbs))) {
            long nfR = countNonFinite(r), nfC = countNonFinite(c);
            if (nfR == 0 && nfC == 0) s = scalarSums(r, c, n); // finite data that overflowed float lanes
            else s = new Sums(n, s.rr, s.cc, s.dd, s.cr, s.maxAbs, s.maxIndex, nfR, nfC);
        }
        return s;
    }

    /** The Vector API loads from native segments and byte[]-backed heap segments only; copy anything else. */
    private static MemorySegment vectorable(MemorySegment seg, java.lang.foreign.Arena arena) {
        var base = seg.heapBase();
        if (base.isEmpty() || base.get() instanceof byte[]) return seg;
        return arena.allocate(seg.byteSize(), 64).copyFrom(seg);
    }

    private static Sums vectorSums(MemorySegment rs, MemorySegment cs, long n) {
        int L = S.length();
        double rr = 0, cc = 0, dd = 0, cr = 0;
        float maxAbs = -1f;
        long maxBlock = -1;
        for (long b = 0; b < n; b += BLOCK) {
            long end = Math.min(n, b + BLOCK);
            var vrr = FloatVector.zero(S);
            var vcc = FloatVector.zero(S);
            var vdd = FloatVector.zero(S);
            var vcr = FloatVector.zero(S);
            var vmax = FloatVector.zero(S);
            long i = b;
            for (; i + L <= end; i += L) {
                var x = FloatVector.fromMemorySegment(S, rs, i * 4, LE);
                var y = FloatVector.fromMemorySegment(S, cs, i * 4, LE);
                var d = y.sub(x);
                vrr = x.fma(x, vrr);
                vcc = y.fma(y, vcc);
                vdd = d.fma(d, vdd);
                vcr = x.fma(y, vcr);
                vmax = vmax.max(d.abs());
            }
            float brr = vrr.reduceLanes(VectorOperators.ADD), bcc = vcc.reduceLanes(VectorOperators.ADD);
            float bdd = vdd.reduceLanes(VectorOperators.ADD), bcr = vcr.reduceLanes(VectorOperators.ADD);
            float bmax = vmax.reduceLanes(VectorOperators.MAX);
            for (; i < end; i++) {
                float x = rs.getAtIndex(F32, i), y = cs.getAtIndex(F32, i), d = y - x;
                brr += x * x;
                bcc += y * y;
                bdd += d * d;
                bcr += x * y;
                bmax = Math.max(bmax, Math.abs(d));
            }
            rr += brr;
            cc += bcc;
            dd += bdd;
            cr += bcr;
            if (bmax > maxAbs || Float.isNaN(bmax) && !Float.isNaN(maxAbs)) {
                maxAbs = bmax;
                maxBlock = b;
            }
        }
        long maxIndex = -1;
        if (maxBlock >= 0) {
            long end = Math.min(n, maxBlock + BLOCK);
            for (long i = maxBlock; i < end; i++) {
                float d = Math.abs(cs.getAtIndex(F32, i) - rs.getAtIndex(F32, i));
                if (d == maxAbs || Float.isNaN(maxAbs) && Float.isNaN(d)) { maxIndex = i; break; }
            }
        }
        return new Sums(n, rr, cc, dd, cr, maxAbs < 0 ? 0 : maxAbs, maxIndex < 0 ? 0 : maxIndex, 0, 0);
    }

    private static final java.lang.foreign.ValueLayout.OfFloat F32 =
            java.lang.foreign.ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(LE);

    private static Sums scalarSums(TensorView r, TensorView c, long n) {
        double rr = 0, cc = 0, dd = 0, cr = 0, maxAbs = 0;
        long maxIndex = 0;
        for (long i = 0; i < n; i++) {
            double x = r.getFloat(i), y = c.getFloat(i), d = y - x;
            rr += x * x;
            cc += y * y;
            dd += d * d;
            cr += x * y;
            double a = Math.abs(d);
            if (a > maxAbs) { maxAbs = a; maxIndex = i; }
        }
        return new Sums(n, rr, cc, dd, cr, maxAbs, maxIndex, 0, 0);
    }

    /** Number of NaN or ±Inf elements. */
    public static long countNonFinite(TensorView t) {
        long n = t.elementCount(), count = 0;
        for (long i = 0; i < n; i++) if (!Float.isFinite(t.getFloat(i))) count++;
        return count;
    }

    /** rel L2 ‖c − r‖ / ‖r‖ over rows [cFrom, cFrom+rows) of c against [rFrom, …) of r, rowSize elements each. */
    public static double relL2Rows(TensorView r, long rFrom, TensorView c, long cFrom, long rows, long rowSize) {
        double num = 0, den = 0;
        for (long i = 0; i < rows * rowSize; i++) {
            double x = r.getFloat(rFrom * rowSize + i), y = c.getFloat(cFrom * rowSize + i);
            num += (y - x) * (y - x);
            den += x * x;
        }
        return ratio(num, den);
    }

    /** rel L2 of arbitrary gathers: candidate index ci(k) against reference index ri(k), k in [0, n). */
    public static double relL2Gather(TensorView r, java.util.function.LongUnaryOperator ri, TensorView c,
                                     java.util.function.LongUnaryOperator ci, long n) {
        double num = 0, den = 0;
        for (long k = 0; k < n; k++) {
            double x = r.getFloat(ri.applyAsLong(k)), y = c.getFloat(ci.applyAsLong(k));
            num += (y - x) * (y - x);
            den += x * x;
        }
        return ratio(num, den);
    }

    static double ratio(double num, double den) {
        if (den == 0) return num == 0 ? 0 : Double.POSITIVE_INFINITY;
        return Math.sqrt(num / den);
    }
}
