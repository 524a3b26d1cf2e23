package dev.decodiff.harness.compare;

import dev.decodiff.harness.dump.CapturedTensor;
import dev.decodiff.metal.DType;
import dev.decodiff.metal.TensorView;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.SplittableRandom;

import static org.assertj.core.api.Assertions.assertThat;

class StepSumsTest {
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private static TensorView mapped(float[] a, Arena arena) {
        var seg = arena.allocate(4L * a.length + 4).asSlice(4, 4L * a.length); // unaligned, as in a safetensors file
        for (int i = 0; i < a.length; i++) seg.setAtIndex(F32, i, a[i]);
        return new TensorView("t", DType.F32, new long[]{a.length}, seg);
    }

    private static TensorView bf16(float[] a, Arena arena) {
        var seg = arena.allocate(2L * a.length);
        for (int i = 0; i < a.length; i++)
            seg.setAtIndex(ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), i, (short) (Float.floatToRawIntBits(a[i]) >>> 16));
        return new TensorView("t", DType.BF16, new long[]{a.length}, seg);
    }

    /** Every field, bit for bit (NaN payloads aside: all NaNs read alike in any report). */
    private static void assertSameBits(CellKernel.Sums a, CellKernel.Sums b) {
        assertThat(b.n()).isEqualTo(a.n());
        for (var pair : new double[][]{{a.rr(), b.rr()}, {a.cc(), b.cc()}, {a.dd(), b.dd()}, {a.cr(), b.cr()}, {a.maxAbs(), b.maxAbs()}})
            assertThat(Double.doubleToLongBits(pair[1])).isEqualTo(Double.doubleToLongBits(pair[0]));
        assertThat(b.maxIndex()).isEqualTo(a.maxIndex());
        assertThat(b.nonFiniteRef()).isEqualTo(a.nonFiniteRef());
        assertThat(b.nonFiniteCand()).isEqualTo(a.nonFiniteCand());
    }

    @Test
    void aStepSplitByBlocksGivesEachCellsOwnSums() {
        var rnd = new SplittableRandom(11);
        // Sizes around block edges and empty cells, so that pieces of parallel work start inside, at and past cells.
        int[] sizes = {0, 1, 17, 4095, 4096, 4097, 0, 3 * 4096 + 5, 70_000, 0, 16, 200_003, 5};
        try (var arena = Arena.ofShared()) {
            var r = new TensorView[sizes.length + 3];
            var c = new TensorView[sizes.length + 3];
            for (int k = 0; k < sizes.length; k++) {
                int n = sizes[k];
                var x = new float[n];
                var y = new float[n];
                for (int i = 0; i < n; i++) {
                    x[i] = (float) rnd.nextGaussian();
                    y[i] = x[i] + (float) (1e-3 * rnd.nextGaussian());
                }
                if (k == 3) y[4000] = Float.NaN;
                if (k == 8) y[60_000] = x[60_000] + 7f;
                if (k == 11) y[123] = Float.POSITIVE_INFINITY;
                if (k == 10) java.util.Arrays.fill(x, 3e19f); // float lanes overflow: redone in double
                r[k] = mapped(x, arena);
                c[k] = k % 4 == 1 ? CapturedTensor.of("t", new int[]{n}, y).view() : mapped(y, arena); // heap floats go by cell
            }
            var x = new float[]{1f, -2f, 0.5f, 3f};
            int b = sizes.length;
            r[b] = bf16(x, arena);
            c[b] = bf16(new float[]{1f, -2f, 0.5f, 4f}, arena);
            r[b + 1] = mapped(x, arena); // shapes differ: left to the caller
            c[b + 1] = mapped(new float[3], arena);
            r[b + 2] = mapped(x, arena); // dtypes differ: left to the caller
            c[b + 2] = bf16(x, arena);

            var step = StepSums.of(r, c);
            for (int k = 0; k <= b; k++) assertSameBits(CellKernel.sums(r[k], c[k]), step[k]);
            assertThat(step[b + 1]).isNull();
            assertThat(step[b + 2]).isNull();
            assertThat(step[3].nonFiniteCand()).isEqualTo(1);
            assertThat(step[8].maxIndex()).isEqualTo(60_000);
            assertThat(step[11].nonFiniteCand()).isEqualTo(1);
        }
    }

    @Test
    void sumsFollowOneSpelledOutOrder() {
        // Per block: each lane an fma chain, the lanes added by halving, the tail one by one in float; blocks in double.
        // Whatever JIT tier runs the kernel, these are the bits.
        int lanes = jdk.incubator.vector.FloatVector.SPECIES_PREFERRED.length(), n = 2 * CellKernel.BLOCK + 37;
        var rnd = new SplittableRandom(5);
        var x = new float[n];
        var y = new float[n];
        for (int i = 0; i < n; i++) {
            x[i] = (float) (rnd.nextGaussian() * Math.pow(10, rnd.nextInt(6)));
            y[i] = x[i] + (float) rnd.nextGaussian();
        }
        double rr = 0, dd = 0;
        for (int b = 0; b < n; b += CellKernel.BLOCK) {
            int end = Math.min(n, b + CellKernel.BLOCK), vecEnd = b + (end - b) / lanes * lanes;
            var lr = new float[lanes];
            var ld = new float[lanes];
            for (int i = b; i < vecEnd; i++) {
                float d = y[i] - x[i];
                lr[i % lanes] = Math.fma(x[i], x[i], lr[i % lanes]);
                ld[i % lanes] = Math.fma(d, d, ld[i % lanes]);
            }
            for (int w = lanes / 2; w >= 1; w /= 2)
                for (int i = 0; i < w; i++) {
                    lr[i] += lr[i + w];
                    ld[i] += ld[i + w];
                }
            float br = lr[0], bd = ld[0];
            for (int i = vecEnd; i < end; i++) {
                float d = y[i] - x[i];
                br += x[i] * x[i];
                bd += d * d;
            }
            rr += br;
            dd += bd;
        }
        try (var arena = Arena.ofConfined()) {
            var s = CellKernel.sums(mapped(x, arena), mapped(y, arena));
            assertThat(Double.doubleToLongBits(s.rr())).isEqualTo(Double.doubleToLongBits(rr));
            assertThat(Double.doubleToLongBits(s.dd())).isEqualTo(Double.doubleToLongBits(dd));
        }
    }

    @Test
    void maxOnTheBitsKeepsFloatMaxRules() {
        // |Δ| ordered as ints must agree with Math.max on floats: ±0, subnormals, +Inf, NaN after a larger value.
        var r = new float[4096 + 33];
        var c = r.clone();
        c[10] = -0f;
        c[11] = Float.MIN_VALUE;
        c[4100] = 2f;
        var s = CellKernel.sums(CapturedTensor.of("t", new int[]{r.length}, r).view(), CapturedTensor.of("t", new int[]{c.length}, c).view());
        assertThat(s.maxAbs()).isEqualTo(2.0);
        assertThat(s.maxIndex()).isEqualTo(4100);
        c[4100] = Float.POSITIVE_INFINITY;
        c[20] = Float.NaN;
        s = CellKernel.sums(CapturedTensor.of("t", new int[]{r.length}, r).view(), CapturedTensor.of("t", new int[]{c.length}, c).view());
        assertThat(s.maxAbs()).isNaN();
        assertThat(s.maxIndex()).isEqualTo(20);
        assertThat(s.nonFiniteCand()).isEqualTo(2);
    }
}
