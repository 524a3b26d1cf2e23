package dev.decodiff.harness.bench;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

/**
 * Decode's weight traffic against the read pass of its own round: each step is divided by the pass that follows it,
 * not by the best pass of the run, so a host whose bandwidth doubles for a few rounds does not halve the ratio of the
 * others.
 */
class RoundPassRatioTest {

    @Test
    void eachStepIsDividedByThePassOfItsOwnRound() {
        // 2 GB a token; steps of 0.1 s, 0.05 s, 0.08 s → 20, 40, 25 GB/s; the passes after them 25, 50, 20 GB/s
        var f = Decode.overPasses(2_000_000_000L, new double[]{0.1, 0.05, 0.08}, new double[]{25, 50, 20});
        assertThat(f.min()).isCloseTo(0.8, within(1e-12));
        assertThat(f.median()).isCloseTo(0.8, within(1e-12));
        assertThat(f.max()).isCloseTo(1.25, within(1e-12));
        assertThat(f.samples()).isEqualTo(3);
    }

    @Test
    void aFastPassInAnotherRoundDoesNotLowerTheRatio() {
        // the same traffic (20 GB/s) each round; one pass at 50 GB/s among 25s: against the best pass 0.4, paired 0.8
        var f = Decode.overPasses(2_000_000_000L, new double[]{0.1, 0.1, 0.1, 0.1, 0.1}, new double[]{25, 25, 50, 25, 25});
        assertThat(f.median()).isCloseTo(0.8, within(1e-12));
        assertThat(f.min()).isCloseTo(0.4, within(1e-12));
    }
}
