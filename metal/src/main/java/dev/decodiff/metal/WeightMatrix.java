package dev.decodiff.metal;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * A row-major [rows, cols] weight matrix in its stored dtype (usually a memory-mapped view), multiplied
 * against fp32 activations with fp32 accumulation: y = x·Wᵀ, the convention of torch's Linear.
 */
public record WeightMatrix(String name, DType dtype, int rows, int cols, MemorySegment data) {
    private static final VectorSpecies<Float> F = FloatVector.SPECIES_512;
    private static final VectorSpecies<Short> S = ShortVector.SPECIES_256;
    private static final VectorSpecies<Integer> I = IntVector.SPECIES_512;
    private static final int L = F.length();
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(LE);
    private static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(LE);
    /** Tokens whose dot products share one pass over a weight row in {@link #matmul}. */
    private static final int TOKEN_BLOCK = 4;

    public static WeightMatrix of(TensorView t) {
        if (t.rank() != 2) throw new IllegalArgumentException("tensor '" + t.name() + "' must be 2-D, is " + t.shapeString());
        return of(t, (int) t.dim(0), (int) t.dim(1));
    }

    public static WeightMatrix of(TensorView t, int rows, int cols) {
        if ((long) rows * cols != t.elementCount())
            throw new IllegalArgumentException("tensor '" + t.name() + "' " + t.shapeString() + " is not [" + rows + ", " + cols + "]");
        if (!t.dtype().isFloat()) throw new IllegalArgumentException("tensor '" + t.name() + "' has dtype " + t.dtype());
        return new WeightMatrix(t.name(), t.dtype(), rows, cols, t.data());
    }

    /** The [rows, cols] matrix stored at rows [rowStart, rowStart+rows) of this one (e.g. one expert of a stacked tensor). */
    public WeightMatrix slice(int rowStart, int nRows) {
        long rowBytes = (long) cols * dtype.bytes();
        return new WeightMatrix(name + "[" + rowStart + ":" + (rowStart + nRows) + "]", dtype, nRows, cols,
                data.asSlice(rowStart * rowBytes, nRows * rowBytes));
    }

    public long bytes() { return (long) rows * cols * dtype.bytes(); }

    /** y[yOff + r] = W[r]·x[xOff ..] for every row r. */
    public void matvec(float[] x, int xOff, float[] y, int yOff) {
        Parallel.forRange(rows, 16, (from, to) -> {
            for (int r = from; r < to; r++) y[yOff + r] = dot(r, x, xOff);
        });
    }

    /** Y[t, r] = W[r]·X[t] for t < tokens; X is [tokens, cols], Y is [tokens, rows], both row-major. */
    public void matmul(float[] x, int tokens, float[] y) {
        if (tokens == 1) {
            matvec(x, 0, y, 0);
            return;
        }
        Parallel.forRange(rows, 8, (from, to) -> {
            for (int r = from; r < to; r++) {
                int t = 0;
                for (; t + TOKEN_BLOCK <= tokens; t += TOKEN_BLOCK) dot4(r, x, t, y);
                for (; t < tokens; t++) y[t * rows + r] = dot(r, x, t * cols);
            }
        });
    }

    public float get(int r, int c) {
        long i = (long) r * cols + c;
        return switch (dtype) {
            case F32 -> data.getAtIndex(F32, i);
            case BF16 -> Float.intBitsToFloat((data.getAtIndex(I16, i) & 0xffff) << 16);
            case F16 -> Float.float16ToFloat(data.getAtIndex(I16, i));
            default -> throw new IllegalStateException(dtype.toString());
        };
    }

    /** Row r widened to fp32 into out[off..off+cols). */
    public void row(int r, float[] out, int off) {
        if (dtype == DType.F32) {
            MemorySegment.copy(data, F32, (long) r * cols * 4, out, off, cols);
            return;
        }
        for (int c = 0; c < cols; c++) out[off + c] = get(r, c);
    }

    private FloatVector load(long elem) {
        return switch (dtype) {
            case F32 -> FloatVector.fromMemorySegment(F, data, elem * 4, LE);
            case BF16 -> {
                var s = ShortVector.fromMemorySegment(S, data, elem * 2, LE);
                var i = (IntVector) s.convertShape(VectorOperators.S2I, I, 0);
                yield i.lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats();
            }
            case F16 -> {
                // The Vector API has no half-float conversion; f16 checkpoints are rare, so widen lane by lane.
                var tmp = new float[L];
                for (int k = 0; k < L; k++) tmp[k] = Float.float16ToFloat(data.getAtIndex(I16, elem + k));
                yield FloatVector.fromArray(F, tmp, 0);
            }
            default -> throw new IllegalStateException(dtype.toString());
        };
    }

    public float dot(int r, float[] x, int xOff) {
        long base = (long) r * cols;
        var acc = FloatVector.zero(F);
        int c = 0;
        int bound = cols - (cols % L);
        for (; c < bound; c += L) acc = load(base + c).fma(FloatVector.fromArray(F, x, xOff + c), acc);
        float s = VectorMath.sumLanes(acc);
        for (; c < cols; c++) s += get(r, c) * x[xOff + c];
        return s;
    }

    private void dot4(int r, float[] x, int t, float[] y) {
        long base = (long) r * cols;
        int x0 = t * cols, x1 = x0 + cols, x2 = x1 + cols, x3 = x2 + cols;
        var a0 = FloatVector.zero(F);
        var a1 = FloatVector.zero(F);
        var a2 = FloatVector.zero(F);
        var a3 = FloatVector.zero(F);
        int c = 0;
        int bound = cols - (cols % L);
        for (; c < bound; c += L) {
            var w = load(base + c);
            a0 = w.fma(FloatVector.fromArray(F, x, x0 + c), a0);
            a1 = w.fma(FloatVector.fromArray(F, x, x1 + c), a1);
            a2 = w.fma(FloatVector.fromArray(F, x, x2 + c), a2);
            a3 = w.fma(FloatVector.fromArray(F, x, x3 + c), a3);
        }
        float s0 = VectorMath.sumLanes(a0), s1 = VectorMath.sumLanes(a1);
        float s2 = VectorMath.sumLanes(a2), s3 = VectorMath.sumLanes(a3);
        for (; c < cols; c++) {
            float w = get(r, c);
            s0 += w * x[x0 + c];
            s1 += w * x[x1 + c];
            s2 += w * x[x2 + c];
            s3 += w * x[x3 + c];
        }
        y[t * rows + r] = s0;
        y[(t + 1) * rows + r] = s1;
        y[(t + 2) * rows + r] = s2;
        y[(t + 3) * rows + r] = s3;
    }
}
