package dev.decodiff.harness.ops;

import dev.decodiff.engine.Rope;
import dev.decodiff.engine.RopeSpec;
import dev.decodiff.metal.DType;
import dev.decodiff.metal.VectorMath;
import dev.decodiff.metal.WeightMatrix;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.function.Consumer;

/**
 * The op-level check: each metal kernel (and the engine's RoPE) on seeded random inputs of model shapes — the 1.06 B
 * Gemma 4 the benchmarks use: hidden 1536, FFN 6144, head dims 256 (sliding) and 512 (full) — against the {@link Oracle}.
 * Both sides get the same fp32 inputs (bf16/f16 weights are rounded by the oracle, then stored as bits for ours), so
 * NMSE measures only the kernels' arithmetic: fp32 accumulation against float64. The thresholds (docs/ops.md) sit
 * ≥ 100× above what correct fp32 arithmetic gives here, and ≥ 100× below a bf16-sized error (NMSE ≈ 1e-6), the
 * smallest error of any plausible bug.
 */
public final class KernelChecks {
    /** Per-op thresholds on NMSE; docs/ops.md gives the measured values they sit above. */
    public static final Map<String, Double> THRESHOLDS = Map.of(
            "matvec", 1e-10, "matmul", 1e-10, "rmsnorm", 1e-12, "rope", 1e-9,
            "softmax", 1e-12, "attention", 1e-9, "gelu", 1e-12);

    /** The ops, in the order they run. */
    public static final List<String> OPS = List.of("matvec", "matmul", "rmsnorm", "rope", "softmax", "attention", "gelu");

    public static final long DEFAULT_SEED = 42;
    static final int HIDDEN = 1536, FFN = 6144, TOKENS = 16;
    static final int[] POSITIONS = {0, 1, 2, 7, 100, 511, 1000, 2047, 3000, 4095, 4096};

    /** One check: its op, the kernel it exercises, the shapes, and how to run both sides. */
    public record Check(String op, String kernel, String shape, Body body) {
        public double threshold() { return THRESHOLDS.get(op); }
    }

    /** Runs our kernel and the oracle on the same inputs: ours and the reference, element for element. */
    @FunctionalInterface
    public interface Body {
        Outputs run(Oracle oracle, SplittableRandom rnd);
    }

    public record Outputs(float[] ours, double[] reference) {}

    private KernelChecks() {}

    public static List<Check> all() {
        var l = new ArrayList<Check>();
        l.add(linear("matvec", "bf16", HIDDEN, FFN, 1, Store.ARENA));
        l.add(linear("matvec", "bf16", FFN, HIDDEN, 1, Store.ARENA));
        l.add(linear("matvec", "f32", HIDDEN, FFN, 1, Store.HEAP));
        l.add(linear("matvec", "f32", FFN, HIDDEN, 1, Store.HEAP));
        l.add(linear("matvec", "f16", HIDDEN, FFN, 1, Store.ARENA));
        l.add(linear("matvec", "bf16", 1001, 777, 1, Store.HEAP)); // ragged: row and column tails
        l.add(linear("matmul", "bf16", HIDDEN, FFN, TOKENS, Store.ARENA));
        l.add(linear("matmul", "f32", FFN, HIDDEN, TOKENS, Store.ARENA));
        l.add(linear("matmul", "bf16", 1001, 777, 13, Store.HEAP));
        l.add(rmsNorm(true, TOKENS, HIDDEN));
        l.add(rmsNorm(false, TOKENS * 8, 256));
        l.add(rope(RopeSpec.defaultRope(1e4), 8, 256));
        l.add(rope(RopeSpec.proportional(1e6, 0.25, 1.0), 8, 512));
        l.add(softmax(8, 4096, 4.0));
        l.add(softmax(1, 262_144, 3.0));
        l.add(attention(8, 2, 256, 512, 1.0 / Math.sqrt(256), "scale 1/√d"));
        l.add(attention(8, 1, 512, 4096, 1.0, "scale 1 (Gemma 4)"));
        l.add(gelu(1 << 20));
        return List.copyOf(l);
    }

    /**
     * Runs the checks of the given ops (all when empty); {@code perturb} (op → relative noise) adds noise of
     * NMSE ≈ rel² to our side, to test the checker. Each check's inputs depend only on the seed and its place in
     * {@link #all()}, so a subset sees the same inputs as a full run.
     */
    public static List<OpResult> run(Oracle oracle, long seed, java.util.Set<String> only, Map<String, Double> perturb, Consumer<OpResult> progress) {
        var results = new ArrayList<OpResult>();
        int i = -1;
        for (var c : all()) {
            i++;
            if (!only.isEmpty() && !only.contains(c.op())) continue;
            var rnd = new SplittableRandom(seed * 1_000_003L + i);
            long t0 = System.nanoTime();
            var o = c.body().run(oracle, rnd);
            float[] ours = o.ours();
            Double rel = perturb.get(c.op());
            if (rel != null) ours = perturbed(ours, o.reference(), rel, rnd);
            double[] m = OpResult.nmseAndMaxAbs(ours, o.reference());
            var r = new OpResult(c.op(), c.kernel(), c.shape(), m[0], m[1], m[2], c.threshold(), (System.nanoTime() - t0) / 1e9);
            results.add(r);
            if (progress != null) progress.accept(r);
        }
        return List.copyOf(results);
    }

    private static float[] perturbed(float[] ours, double[] ref, double rel, SplittableRandom rnd) {
        double ss = 0;
        for (double v : ref) ss += v * v;
        double sigma = rel * Math.sqrt(ss / ref.length);
        var p = ours.clone();
        for (int i = 0; i < p.length; i++) p[i] += (float) (sigma * rnd.nextGaussian());
        return p;
    }

    // ---- inputs

    static float[] gaussian(SplittableRandom rnd, int n, double std) {
        var a = new float[n];
        for (int i = 0; i < n; i++) a[i] = (float) (std * rnd.nextGaussian());
        return a;
    }

    /** Where our side's weights live: a byte[]-backed heap segment, or native memory (as a memory-mapped checkpoint). */
    enum Store { HEAP, ARENA }

    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /** Stores fp32 values that are exactly representable in dtype, in dtype's little-endian bits (safetensors layout). */
    static MemorySegment store(float[] w, DType dtype, Store where, Arena arena) {
        long bytes = (long) w.length * dtype.bytes();
        MemorySegment seg = where == Store.ARENA ? arena.allocate(bytes, 64) : MemorySegment.ofArray(new byte[(int) bytes]);
        if (dtype == DType.F32) {
            MemorySegment.copy(w, 0, seg, F32, 0, w.length);
            return seg;
        }
        var bits = new short[w.length];
        for (int i = 0; i < w.length; i++) {
            switch (dtype) {
                case BF16 -> {
                    int b = Float.floatToRawIntBits(w[i]);
                    if ((b & 0xffff) != 0) throw new IllegalStateException("the oracle's bf16 rounding left low bits in " + w[i]);
                    bits[i] = (short) (b >>> 16);
                }
                case F16 -> {
                    bits[i] = Float.floatToFloat16(w[i]);
                    if (Float.float16ToFloat(bits[i]) != w[i]) throw new IllegalStateException("the oracle's f16 rounding is not exact for " + w[i]);
                }
                default -> throw new IllegalArgumentException(dtype.toString());
            }
        }
        MemorySegment.copy(bits, 0, seg, I16, 0, bits.length);
        return seg;
    }

    // ---- the checks

    static Check linear(String op, String dtype, int in, int out, int tokens, Store where) {
        String kernel = tokens == 1 ? "WeightMatrix.matvec" : "WeightMatrix.matmul";
        String shape = dtype + " W[" + out + "," + in + "] (" + where.name().toLowerCase() + ") · x[" + (tokens == 1 ? "" : tokens + ",") + in + "]";
        DType dt = switch (dtype) {
            case "bf16" -> DType.BF16;
            case "f16" -> DType.F16;
            default -> DType.F32;
        };
        return new Check(op, kernel, shape, (oracle, rnd) -> {
            float[] w = gaussian(rnd, out * in, 0.02);
            if (dt != DType.F32) w = oracle.roundTo(dtype, w);
            float[] x = gaussian(rnd, tokens * in, 1.0);
            var y = new float[tokens * out];
            try (var arena = Arena.ofShared()) {
                var m = new WeightMatrix("w", dt, out, in, store(w, dt, where, arena));
                if (tokens == 1) m.matvec(x, 0, y, 0);
                else m.matmul(x, tokens, y);
            }
            return new Outputs(y, oracle.linear(w, out, in, x, tokens));
        });
    }

    static Check rmsNorm(boolean weighted, int rows, int n) {
        String shape = "x[" + rows + "," + n + "]" + (weighted ? " · w[" + n + "]" : ", no weight") + ", eps 1e-6";
        return new Check("rmsnorm", "VectorMath.rmsNorm", shape, (oracle, rnd) -> {
            float[] x = gaussian(rnd, rows * n, 3.0);
            float[] w = null;
            if (weighted) {
                w = gaussian(rnd, n, 0.5);
                for (int i = 0; i < n; i++) w[i] += 1f;
            }
            var y = new float[rows * n];
            for (int r = 0; r < rows; r++) VectorMath.rmsNorm(x, r * n, n, w, 1e-6f, y, r * n);
            return new Outputs(y, oracle.rmsNorm(x, rows, n, w, 1e-6f));
        });
    }

    static Check rope(RopeSpec spec, int heads, int d) {
        String shape = spec.type() + " θ=" + (long) spec.theta() + (spec.type().equals("proportional") ? " partial " + spec.partialRotaryFactor() : "")
                + ", x[" + POSITIONS.length + "," + heads + "," + d + "] at p ≤ " + POSITIONS[POSITIONS.length - 1];
        return new Check("rope", "engine.Rope.apply", shape, (oracle, rnd) -> {
            int t = POSITIONS.length;
            float[] x = gaussian(rnd, t * heads * d, 1.0);
            float[] y = x.clone();
            var rope = new Rope(spec, d);
            for (int i = 0; i < t; i++) rope.apply(y, i * heads * d, heads, POSITIONS[i]);
            return new Outputs(y, oracle.rope(x, t, heads, d, POSITIONS, spec.type(), spec.theta(), spec.partialRotaryFactor(), spec.factor()));
        });
    }

    static Check softmax(int rows, int n, double std) {
        return new Check("softmax", "VectorMath.softmax", "x[" + rows + "," + n + "], σ=" + std, (oracle, rnd) -> {
            float[] x = gaussian(rnd, rows * n, std);
            float[] y = x.clone();
            for (int r = 0; r < rows; r++) VectorMath.softmax(y, r * n, n);
            return new Outputs(y, oracle.softmax(x, rows, n));
        });
    }

    static Check attention(int nh, int nkv, int d, int ctx, double scale, String what) {
        String shape = "q[" + nh + "," + d + "] K,V[" + ctx + "," + nkv + "," + d + "], " + what;
        return new Check("attention", "VectorMath dotsHeads/softmax/weightedSumHeads", shape, (oracle, rnd) -> {
            float[] q = gaussian(rnd, nh * d, 1.0), k = gaussian(rnd, ctx * nkv * d, 1.0), v = gaussian(rnd, ctx * nkv * d, 1.0);
            return new Outputs(attention(q, nh, k, v, ctx, nkv, d, (float) scale), oracle.attention(q, nh, k, v, ctx, nkv, d, scale));
        });
    }

    /**
     * Our side of attention for one query position, from the kernels the engine runs: per KV head, its query heads
     * four at a time, q·Kᵀ → softmax → ·V.
     */
    static float[] attention(float[] q, int nh, float[] k, float[] v, int ctx, int nkv, int d, float scale) {
        var out = new float[nh * d];
        var p = new float[VectorMath.HEADS * ctx];
        var rowsK = new float[ctx][];
        var rowsV = new float[ctx][];
        var offsets = new int[ctx];
        var qOff = new int[VectorMath.HEADS];
        java.util.Arrays.fill(rowsK, k);
        java.util.Arrays.fill(rowsV, v);
        int group = nh / nkv;
        for (int g = 0; g < nkv; g++) {
            for (int c = 0; c < ctx; c++) offsets[c] = (c * nkv + g) * d;
            for (int h0 = g * group; h0 < (g + 1) * group; h0 += VectorMath.HEADS) {
                int heads = Math.min(VectorMath.HEADS, (g + 1) * group - h0);
                for (int h = 0; h < heads; h++) qOff[h] = (h0 + h) * d;
                VectorMath.dotsHeads(q, qOff, heads, rowsK, offsets, ctx, d, p, ctx);
                for (int i = 0; i < heads * ctx; i++) p[i] *= scale;
                for (int h = 0; h < heads; h++) VectorMath.softmax(p, h * ctx, ctx);
                VectorMath.weightedSumHeads(p, ctx, heads, rowsV, offsets, ctx, d, out, qOff);
            }
        }
        return out;
    }

    static Check gelu(int n) {
        return new Check("gelu", "VectorMath.geluTanh", "x[" + n + "], σ=3", (oracle, rnd) -> {
            float[] x = gaussian(rnd, n, 3.0);
            var y = new float[n];
            for (int i = 0; i < n; i++) y[i] = VectorMath.geluTanh(x[i]);
            return new Outputs(y, oracle.geluTanh(x));
        });
    }
}
