package dev.decodiff.harness.compare;

import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.SyntheticDump;
import dev.decodiff.harness.dump.CapturedTensor;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.dump.DumpValidator;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * A dump that declares {@code "read_rows": "last:N"} holds only the last N rows of each k_read/v_read (a long-context
 * reference's full layers): compared on those rows against a side that holds them all, in either direction; without
 * the declaration, or with rows other than the last, the cut is still a divergence.
 */
class ReadRowsTest {
    @TempDir
    Path tmp;
    Path full;

    @BeforeEach
    void fullReads() { full = SyntheticDump.write(tmp.resolve("full"), SyntheticDump.NONE); }

    /** Cuts every k_read/v_read to n rows: the last ones, or (a broken producer) the first ones. */
    private static SyntheticDump.Mutation cut(int n, boolean last) {
        return (s, t) -> {
            for (var name : List.copyOf(t.keySet())) {
                if (!name.endsWith(".attn.k_read") && !name.endsWith(".attn.v_read")) continue;
                var x = t.get(name);
                long rows = x.shape()[0];
                if (rows <= n) continue;
                int row = (int) (x.data().length / rows);
                int from = last ? (int) (rows - n) * row : 0;
                var shape = x.shape().clone();
                shape[0] = n;
                t.put(name, new CapturedTensor(name, shape, Arrays.copyOfRange(x.data(), from, from + n * row)));
            }
        };
    }

    private Path cutDump(String name, int n, boolean last, String declared) {
        Path d = SyntheticDump.write(tmp.resolve(name), cut(n, last));
        if (declared != null) SyntheticDump.editManifest(d, "\"steps\" :", "\"read_rows\" : \"" + declared + "\",\n  \"steps\" :");
        return d;
    }

    @Test
    void aDeclaredCutIsComparedOnTheLastRowsInEitherDirection() {
        Path cut = cutDump("cut", 3, true, "last:3");
        var asCandidate = Comparison.compareDumps(full, cut, Comparison.Options.defaults());
        assertThat(asCandidate.verdict()).isEqualTo("match");
        assertThat(asCandidate.cells()).filteredOn(c -> c.point().endsWith("k_read")).isNotEmpty()
                .allMatch(c -> c.shape()[0] <= 3);
        assertThat(asCandidate.notes()).anyMatch(n -> n.contains("the candidate declares read_rows last:3"));

        var asReference = Comparison.compareDumps(cut, full, Comparison.Options.defaults());
        assertThat(asReference.verdict()).isEqualTo("match");
        assertThat(asReference.notes()).anyMatch(n -> n.contains("the reference declares read_rows last:3"));
        assertThat(DumpValidator.validate(cut).valid()).isTrue();
        var inspect = dev.decodiff.harness.cli.CliTest.run("inspect", cut.toString());
        assertThat(inspect.code()).isZero();
        assertThat(inspect.out()).contains("k_read/v_read hold the last 3 positions read at most (read_rows last:3)");
        assertThat(dev.decodiff.harness.cli.CliTest.run("inspect", full.toString()).out()).doesNotContain("read_rows");
    }

    @Test
    void anUndeclaredCutOrTheWrongRowsStayADivergence() {
        var undeclared = Comparison.compareDumps(full, cutDump("undeclared", 3, true, null), Comparison.Options.defaults());
        assertThat(undeclared.verdict()).isEqualTo("divergence");
        assertThat(undeclared.firstDivergence().point()).endsWith("attn.k_read");

        var firstRows = Comparison.compareDumps(full, cutDump("first", 3, false, "last:3"), Comparison.Options.defaults());
        assertThat(firstRows.verdict()).isEqualTo("divergence");
        assertThat(firstRows.firstDivergence().point()).endsWith("attn.k_read");
        assertThat(firstRows.firstDivergence().cell().relL2()).isGreaterThan(1e-3);
    }

    @Test
    void aDumpHoldingMoreRowsThanItDeclaresOrAMalformedDeclarationIsRefused() {
        Path over = cutDump("over", 3, true, "last:2");
        var v = DumpValidator.validate(over);
        assertThat(v.valid()).isFalse();
        assertThat(v.problems()).anyMatch(p -> p.contains("holds 3 rows") && p.contains("\"read_rows\": \"last:2\""));
        assertThatThrownBy(() -> DumpReader.open(over)).isInstanceOf(BadInputException.class).hasMessageContaining("last:2");

        Path bad = cutDump("bad", 3, true, "first:3");
        assertThatThrownBy(() -> DumpReader.open(bad)).isInstanceOf(BadInputException.class)
                .hasMessageContaining("\"read_rows\" is \"first:3\"");
        assertThat(DumpValidator.validate(bad).problems()).anyMatch(p -> p.contains("\"read_rows\""));
    }
}
