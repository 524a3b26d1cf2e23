package dev.decodiff.harness.testing;

import dev.decodiff.harness.compare.Comparison;
import dev.decodiff.harness.compare.ComparisonResult;
import dev.decodiff.harness.compare.ToleranceProfile;
import dev.decodiff.harness.dump.DumpReader;

import java.nio.file.Path;

/**
 * Entry point of decodiff's AssertJ assertions, for golden tests in a few lines:
 * <pre>{@code
 * assertThat(EngineRun.of(model)).matchesReference(dump);
 * assertThat(EngineRun.of(model).withFaults(Fault.K_EQ_V_ROTATED_KEYS)).divergesFrom(dump, 1, "layers.5.attn.v_read");
 * assertThatDump(Path.of("out/mine")).matchesReference(Path.of("reference-dumps/gemma4-tiny/long"));
 * }</pre>
 */
public final class DecodiffAssertions {
    private DecodiffAssertions() {}

    public static EngineRunAssert assertThat(EngineRun run) { return new EngineRunAssert(run); }

    public static ComparisonAssert assertThat(ComparisonResult result) { return new ComparisonAssert(result); }

    /** A candidate dump folder, compared when {@link DumpAssert#matchesReference} is called. */
    public static DumpAssert assertThatDump(Path candidate) { return new DumpAssert(candidate); }

    public static final class DumpAssert extends org.assertj.core.api.AbstractAssert<DumpAssert, Path> {
        DumpAssert(Path actual) { super(actual, DumpAssert.class); }

        public ComparisonAssert matchesReference(Path reference) {
            var profile = ToleranceProfile.forReference(DumpReader.open(reference).manifest().producer());
            var r = Comparison.compareDumps(reference, actual, new Comparison.Options(profile, false, null));
            return new ComparisonAssert(r).isMatch();
        }
    }
}
