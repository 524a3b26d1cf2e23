package dev.decodiff.engine.quant;

import dev.decodiff.metal.SafetensorsFile;
import dev.decodiff.metal.TensorView;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.net.URISyntaxException;
import java.nio.file.Path;
import java.util.ArrayList;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The dequantizer against a fixture NumPy made independently (checkpoints/make_mlx_checkpoints.py packing): for every
 * bit width MLX has (2, 3, 4, 5, 6, 8; 3, 5 and 6 cross byte and word boundaries) and every group size (32, 64,
 * 128), the packed codes, bf16 scales and biases, the codes themselves and the fp32 weights.
 */
class AffineDequantizerTest {

    static Path fixture() throws URISyntaxException {
        return Path.of(AffineDequantizerTest.class.getResource("/mlx-packing.safetensors").toURI());
    }

    @Test
    void everyBitWidthAndGroupSizeDequantizesToNumPysWeightsBitForBit() throws Exception {
        try (var f = SafetensorsFile.open(fixture()); var arena = Arena.ofConfined()) {
            var seen = new ArrayList<String>();
            for (int bits : new int[]{2, 3, 4, 5, 6, 8}) {
                for (int g : new int[]{32, 64, 128}) {
                    String k = "b" + bits + "g" + g;
                    TensorView w = f.tensors().get(k + ".weight"), want = f.tensors().get(k + ".dequantized");
                    TensorView codes = f.tensors().get(k + ".codes");
                    int rows = (int) want.dim(0), cols = (int) want.dim(1);
                    assertThat(w.dim(1) * 32).isEqualTo((long) cols * bits);
                    var out = arena.allocate((long) rows * cols * 4);
                    AffineDequantizer.dequantize(w.data(), f.tensors().get(k + ".scales"), f.tensors().get(k + ".biases"), bits, g, rows, cols, out);
                    var got = new TensorView(k, dev.decodiff.metal.DType.F32, want.shape(), out).toFloats();
                    assertThat(got).as(k).containsExactly(want.toFloats());
                    var c = codes.data().toArray(java.lang.foreign.ValueLayout.JAVA_INT);
                    for (int r = 0; r < rows; r++)
                        for (int col = 0; col < cols; col++)
                            assertThat(AffineDequantizer.code(w.data(), bits, cols, r, col)).as(k + " code (" + r + ", " + col + ")").isEqualTo(c[r * cols + col]);
                    // every code value occurs: the fixture exercises the whole range, top bits included
                    assertThat(java.util.Arrays.stream(c).max().getAsInt()).as(k).isEqualTo((1 << bits) - 1);
                    seen.add(k);
                }
            }
            assertThat(seen).hasSize(18);
        }
    }
}
