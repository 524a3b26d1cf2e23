package dev.decodiff.harness.compare;

import dev.decodiff.metal.DType;
import dev.decodiff.metal.TensorView;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;

/**
 * One pass over a (reference, candidate) pair with Vector API kernels: ‖r‖², ‖c‖², ‖c−r‖², c·r and max |c−r|.
 * Sums run in float lanes inside blocks of {@value #BLOCK} elements and in double across blocks, which keeps rel L2
 * exact to a few ulps at 1e-7 and tensors of any size. Non-finite values poison the sums, so only then is the data
 * scanned again to count them; the index of max |Δ| is found by rescanning the one block that held it.
 *
 * <p>The pass is split in two so that a step's blocks can be spread over the cores ({@link StepSums}): {@link
 * #blockPartials} computes each block's float partials on its own (any thread, any order), {@link #combine} adds
 * them in block order. A block's partials do not depend on who computes them, so the sums are the same bits however
 * the work is split.
 */
public final class CellKernel {
    private static final VectorSpecies<Float> S = FloatVector.SPECIES_PREFERRED;
    /** Int lanes of the same shape, for max |Δ| on the bits (see {@link #blockPartials}). */
    private static final VectorSpecies<Integer> SI = VectorSpecies.of(int.class, S.vectorShape());
    /** Elements per block: float sums over one block stay exact enough, and a block is the unit of parallel work. */
    static final int BLOCK = 4096;
    /** Floats of partials per block: ‖r‖², ‖c‖², ‖c−r‖², c·r, max |c−r|. */
    static final int PARTIALS = 5;
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    private CellKernel() {}

    /** Raw sums of one cell; both tensors hold n elements. */
    public record Sums(long n, double rr, double cc, double dd, double cr, double maxAbs, long maxIndex,
                       long nonFiniteRef, long nonFiniteCand) {}

    public static Sums sums(TensorView r, TensorView c) {
        long n = r.elementCount();
        if (c.elementCount() != n) throw new IllegalArgumentException("element counts differ: " + n + " vs " + c.elementCount());
        Sums s;
        if (vectorable(r, c)) {
            s = vectorSums(r.data(), c.data(), n);
        } else if (r.dtype() == DType.F32 && c.dtype() == DType.F32) {
            try (var arena = java.lang.foreign.Arena.ofConfined()) {
                s = vectorSums(copyIfNeeded(r.data(), arena), copyIfNeeded(c.data(), arena), n);
            }
        } else {
            s = scalarSums(r, c, n);
        }
        return withNonFinite(s, r, c);
    }

    /**
     * Whether the pair can go through the vector kernel as it is: float32 on both sides, in segments the Vector API
     * loads from (native, or byte[]-backed heap).
     */
    static boolean vectorable(TensorView r, TensorView c) {
        return r.dtype() == DType.F32 && c.dtype() == DType.F32 && loadable(r.data()) && loadable(c.data());
    }

    static boolean loadable(MemorySegment seg) {
        var base = seg.heapBase();
        return base.isEmpty() || base.get() instanceof byte[];
    }

    /** The Vector API loads from native segments and byte[]-backed heap segments only; copy anything else. */
    private static MemorySegment copyIfNeeded(MemorySegment seg, java.lang.foreign.Arena arena) {
        return loadable(seg) ? seg : arena.allocate(seg.byteSize(), 64).copyFrom(seg);
    }

    /**
     * Non-finite sums mean NaN/Inf in the data (count them) or finite data that overflowed float lanes (redo the
     * cell in double, element by element).
     */
    static Sums withNonFinite(Sums s, TensorView r, TensorView c) {
        if (Double.isFinite(s.rr) && Double.isFinite(s.cc) && Double.isFinite(s.dd) && Double.isFinite(s.cr) && Double.isFinite(s.maxAbs))
            return s;
        long nfR = countNonFinite(r), nfC = countNonFinite(c);
        if (nfR == 0 && nfC == 0) return scalarSums(r, c, r.elementCount());
        return new Sums(s.n, s.rr, s.cc, s.dd, s.cr, s.maxAbs, s.maxIndex, nfR, nfC);
    }

    static long blockCount(long n) { return (n + BLOCK - 1) / BLOCK; }

    private static Sums vectorSums(MemorySegment rs, MemorySegment cs, long n) {
        var partials = new float[Math.toIntExact(blockCount(n) * PARTIALS)];
        blockPartials(rs, cs, n, 0, blockCount(n), partials, 0);
        return combine(rs, cs, n, partials, 0);
    }

    /**
     * The float partials of blocks [fromBlock, toBlock) of an n-element pair, {@value #PARTIALS} per block, written to
     * {@code out} from {@code at} (block fromBlock's first partial).
     *
     * <p>max |Δ| runs on the bits: |Δ| has its sign bit clear, and non-negative floats order as their bit patterns
     * do, NaN patterns above +Inf; a signed int max is one instruction with one cycle of latency, where a float max
     * with Java's NaN and −0 rules is a sequence that became the loop's critical path.
     */
    static void blockPartials(MemorySegment rs, MemorySegment cs, long n, long fromBlock, long toBlock, float[] out, int at) {
        int L = S.length();
        var lanes = new float[L];
        for (long blk = fromBlock; blk < toBlock; blk++) {
            long b = blk * BLOCK, end = Math.min(n, b + BLOCK);
            var vrr = FloatVector.zero(S);
            var vcc = FloatVector.zero(S);
            var vdd = FloatVector.zero(S);
            var vcr = FloatVector.zero(S);
            var vmax = IntVector.zero(SI);
            long i = b;
            for (; i + L <= end; i += L) {
                var x = FloatVector.fromMemorySegment(S, rs, i * 4, LE);
                var y = FloatVector.fromMemorySegment(S, cs, i * 4, LE);
                var d = y.sub(x);
                vrr = x.fma(x, vrr);
                vcc = y.fma(y, vcc);
                vdd = d.fma(d, vdd);
                vcr = x.fma(y, vcr);
                vmax = vmax.max(d.abs().reinterpretAsInts());
            }
            float brr = laneSum(vrr, lanes), bcc = laneSum(vcc, lanes), bdd = laneSum(vdd, lanes), bcr = laneSum(vcr, lanes);
            float bmax = Float.intBitsToFloat(vmax.reduceLanes(VectorOperators.MAX));
            for (; i < end; i++) {
                float x = rs.getAtIndex(F32, i), y = cs.getAtIndex(F32, i), d = y - x;
                brr += x * x;
                bcc += y * y;
                bdd += d * d;
                bcr += x * y;
                bmax = Math.max(bmax, Math.abs(d));
            }
            out[at++] = brr;
            out[at++] = bcc;
            out[at++] = bdd;
            out[at++] = bcr;
            out[at++] = bmax;
        }
    }

    /**
     * The sum of v's lanes by halving: lane i + lane i + L/2, down to one lane. That is the order C2 compiles
     * {@code reduceLanes(ADD)} to on x86, while the interpreter and C1 add the lanes one by one; spelled out in
     * scalar adds, a block's sums are the same bits whichever tier runs it (a run's first blocks, code just
     * deoptimized), so one comparison never gives two answers.
     */
    private static float laneSum(FloatVector v, float[] lanes) {
        v.intoArray(lanes, 0);
        for (int w = lanes.length / 2; w >= 1; w /= 2)
            for (int i = 0; i < w; i++) lanes[i] += lanes[i + w];
        return lanes[0];
    }

    /** Adds all blocks' partials (from {@code at}) in block order, and finds the index of max |Δ|. */
    static Sums combine(MemorySegment rs, MemorySegment cs, long n, float[] partials, int at) {
        double rr = 0, cc = 0, dd = 0, cr = 0;
        float maxAbs = -1f;
        long maxBlock = -1;
        for (long blk = 0, blocks = blockCount(n); blk < blocks; blk++, at += PARTIALS) {
            rr += partials[at];
            cc += partials[at + 1];
            dd += partials[at + 2];
            cr += partials[at + 3];
            float bmax = partials[at + 4];
            if (bmax > maxAbs || Float.isNaN(bmax) && !Float.isNaN(maxAbs)) {
                maxAbs = bmax;
                maxBlock = blk * BLOCK;
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
        if (Float.isNaN(maxAbs)) maxAbs = Float.NaN; // any NaN the bit max picked reads as the one NaN
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

    public static double ratio(double num, double den) {
        if (den == 0) return num == 0 ? 0 : Double.POSITIVE_INFINITY;
        return Math.sqrt(num / den);
    }
}
