package dev.decodiff.harness.compare.detect;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.harness.SyntheticDump;
import dev.decodiff.harness.compare.Comparison;
import dev.decodiff.harness.compare.ComparisonResult;
import dev.decodiff.harness.dump.CapturedTensor;
import dev.decodiff.harness.report.JsonReport;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;

import static dev.decodiff.harness.SyntheticDump.D;
import static dev.decodiff.harness.SyntheticDump.NKV;
import static org.assertj.core.api.Assertions.assertThat;

/** The cache-side variants compare names from the two dumps alone, each on a synthetic mutation of the candidate. */
class CacheVariantsTest {
    static final int ROW = NKV * D;

    @TempDir
    Path tmp;
    Path ref;

    @BeforeEach
    void reference() { ref = SyntheticDump.write(tmp.resolve("ref"), SyntheticDump.NONE); }

    private ComparisonResult compare(SyntheticDump.Mutation m) {
        return Comparison.compareDumps(ref, SyntheticDump.write(tmp.resolve("cand"), m), Comparison.Options.defaults());
    }

    private static SyntheticDump.Mutation readRows(int step, String point, java.util.function.Consumer<float[]> f) {
        return (s, t) -> { if (s == step) f.accept(t.get(point).data()); };
    }

    @Test
    void aReadRowOfZerosIsAPositionNeverWritten() {
        // step 2 reads positions 0–5; position 3 (row 3) comes back as zeros
        var r = compare(readRows(2, "layers.1.attn.k_read", a -> java.util.Arrays.fill(a, 3 * ROW, 4 * ROW, 0f)));
        var fd = r.firstDivergence();
        assertThat(fd.point()).isEqualTo("layers.1.attn.k_read");
        assertThat(fd.diagnosis()).contains("all zeros at position 3 and right elsewhere").contains("never written");
        assertThat(fd.variant()).isEqualTo(new Finding.Variant("cache read", "a row never written"));
    }

    @Test
    void twoReadRowsHoldingOnePositionCollideInOneSlot() {
        // row 4 (position 4) holds position 1's keys: position 4 was written over position 1's slot, read twice
        var r = compare(readRows(3, "layers.0.attn.k_read", a -> System.arraycopy(a.clone(), ROW, a, 4 * ROW, ROW)));
        var fd = r.firstDivergence();
        assertThat(fd.diagnosis()).contains("the rows of positions 1 and 4 both hold position 1").contains("collide in one cache slot");
        assertThat(fd.variant()).isEqualTo(new Finding.Variant("cache slots", "positions colliding in one slot"));
    }

    @Test
    void swappedReadRowsAreRowsOutOfOrder() {
        var r = compare(readRows(3, "layers.2.attn.v_read", a -> {
            var b = a.clone();
            System.arraycopy(b, 0, a, 2 * ROW, ROW);
            System.arraycopy(b, 2 * ROW, a, 0, ROW);
        }));
        assertThat(r.firstDivergence().variant()).isEqualTo(new Finding.Variant("cache slots", "rows out of order"));
    }

    @Test
    void aWindowTwoPositionsTooLongIsNamedOffByTwoNotByOne() {
        var r = compare((s, t) -> {
            if (s != 3) return;
            var k = t.get("layers.0.attn.k_read");
            var longer = new float[k.data().length + 2 * ROW];
            java.util.Arrays.fill(longer, 0, 2 * ROW, 0.5f);
            System.arraycopy(k.data(), 0, longer, 2 * ROW, k.data().length);
            long[] shape = k.shape().clone();
            shape[0] += 2;
            t.put(k.point(), new CapturedTensor(k.point(), shape, longer));
        });
        var fd = r.firstDivergence();
        assertThat(fd.diagnosis()).contains("also reads 2 older ones").contains("the read window is off by 2").doesNotContain("off by one");
        assertThat(fd.variant()).isEqualTo(new Finding.Variant("cache window", "window off by +2"));
    }

    @Test
    void compareJsonCarriesTheVariantAndANullWhenThereIsNone() throws Exception {
        var named = compare(readRows(2, "layers.1.attn.k_read", a -> java.util.Arrays.fill(a, 3 * ROW, 4 * ROW, 0f)));
        var j = new ObjectMapper().readTree(JsonReport.render(named));
        var v = j.get("first_divergence").get("variant");
        assertThat(v.get("op").asText()).isEqualTo("cache read");
        assertThat(v.get("name").asText()).isEqualTo("a row never written");

        var unnamed = compare(readRows(1, "layers.0.attn.out", a -> a[0] += 5f));
        var u = new ObjectMapper().readTree(JsonReport.render(unnamed)).get("first_divergence");
        assertThat(u.has("variant")).isTrue();
        assertThat(u.get("variant").isNull()).isTrue();
    }

    @Test
    void terminalVerdictNamesTheVariant() {
        var r = compare(readRows(2, "layers.1.attn.k_read", a -> java.util.Arrays.fill(a, 3 * ROW, 4 * ROW, 0f)));
        assertThat(dev.decodiff.harness.report.VerdictText.paragraph(r)).contains("Variant: cache read — a row never written.");
    }
}
