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
import static org.assertj.core.api.Assertions.within;

class CellKernelTest {
    private static TensorView heap(float[] a) { return CapturedTensor.of("t", new int[]{a.length}, a).view(); }

    private static TensorView mapped(float[] a, Arena arena) {
        var seg = arena.allocate(4L * a.length + 4).asSlice(4); // deliberately unaligned to 8/16/64
        for (int i = 0; i < a.length; i++) seg.setAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), i, a[i]);
        return new TensorView("t", DType.F32, new long[]{a.length}, seg);
    }

    private static TensorView bf16(float[] a, Arena arena) {
        var seg = arena.allocate(2L * a.length);
        for (int i = 0; i < a.length; i++)
            seg.setAtIndex(ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), i, (short) (Float.floatToRawIntBits(a[i]) >>> 16));
        return new TensorView("t", DType.BF16, new long[]{a.length}, seg);
    }

    @Test
    void matchesAScalarDoubleReferenceForOddSizes() {
        var rnd = new SplittableRandom(7);
        for (int n : new int[]{1, 3, 15, 16, 17, 4095, 4096, 4097, 10_001}) {
            var r = new float[n];
            var c = new float[n];
            for (int i = 0; i < n; i++) {
                r[i] = (float) rnd.nextGaussian();
                c[i] = r[i] + (float) (1e-3 * rnd.nextGaussian());
            }
            int spike = n / 2;
            c[spike] = r[spike] + 0.5f;
            double rr = 0, cc = 0, dd = 0;
            for (int i = 0; i < n; i++) {
                rr += (double) r[i] * r[i];
                cc += (double) c[i] * c[i];
                dd += ((double) c[i] - r[i]) * ((double) c[i] - r[i]);
            }
            try (var arena = Arena.ofConfined()) {
                for (var pair : new TensorView[][]{{heap(r), heap(c)}, {mapped(r, arena), heap(c)}, {mapped(r, arena), mapped(c, arena)}}) {
                    var s = CellKernel.sums(pair[0], pair[1]);
                    var cell = CellStats.of(0, "x", new long[]{n}, s, 1);
                    assertThat(cell.relL2()).isCloseTo(Math.sqrt(dd / rr), within(1e-6 * Math.sqrt(dd / rr)));
                    assertThat(cell.normRatio()).isCloseTo(Math.sqrt(cc / rr), within(1e-6));
                    assertThat(s.maxIndex()).isEqualTo(spike);
                    assertThat(s.maxAbs()).isCloseTo(0.5, within(1e-2));
                    assertThat(s.nonFiniteCand()).isZero();
                }
            }
        }
    }

    @Test
    void identicalTensorsGiveZeroAndCosineOne() {
        var a = new float[1000];
        for (int i = 0; i < a.length; i++) a[i] = (float) Math.sin(i);
        var cell = CellStats.of(0, "x", new long[]{1000}, CellKernel.sums(heap(a), heap(a.clone())), 1e-4);
        assertThat(cell.relL2()).isZero();
        assertThat(cell.cosine()).isCloseTo(1.0, within(1e-6));
        assertThat(cell.passed()).isTrue();
    }

    @Test
    void countsNonFiniteOnEitherSide() {
        var r = new float[300];
        var c = new float[300];
        java.util.Arrays.fill(r, 1f);
        java.util.Arrays.fill(c, 1f);
        c[5] = Float.NaN;
        c[200] = Float.POSITIVE_INFINITY;
        var s = CellKernel.sums(heap(r), heap(c));
        assertThat(s.nonFiniteCand()).isEqualTo(2);
        assertThat(s.nonFiniteRef()).isZero();
        var cell = CellStats.of(0, "x", new long[]{300}, s, 1e-4);
        assertThat(cell.failed()).isTrue();
        r[7] = Float.NEGATIVE_INFINITY;
        assertThat(CellKernel.sums(heap(r), heap(r.clone())).nonFiniteRef()).isEqualTo(1);
    }

    @Test
    void hugeFiniteValuesDoNotLookNonFinite() {
        var r = new float[64];
        java.util.Arrays.fill(r, 3e19f); // squares overflow float
        var s = CellKernel.sums(heap(r), heap(r.clone()));
        assertThat(s.nonFiniteCand()).isZero();
        assertThat(CellStats.of(0, "x", new long[]{64}, s, 1e-4).relL2()).isZero();
    }

    @Test
    void bf16IsWidenedExactly() {
        try (var arena = Arena.ofConfined()) {
            var a = new float[]{1f, -2f, 0.5f, 3f};
            var s = CellKernel.sums(bf16(a, arena), heap(new float[]{1f, -2f, 0.5f, 4f}));
            assertThat(s.maxAbs()).isEqualTo(1.0);
            assertThat(s.maxIndex()).isEqualTo(3);
        }
    }

    @Test
    void zeroReference() {
        var z = new float[8];
        assertThat(CellStats.of(0, "x", new long[]{8}, CellKernel.sums(heap(z), heap(z.clone())), 1e-4).passed()).isTrue();
        var c = new float[8];
        c[1] = 1e-3f;
        assertThat(CellStats.of(0, "x", new long[]{8}, CellKernel.sums(heap(z), heap(c)), 1e-4).passed()).isFalse();
    }
}
