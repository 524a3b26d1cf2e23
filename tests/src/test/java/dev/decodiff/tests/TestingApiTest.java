package dev.decodiff.tests;

import dev.decodiff.engine.Fault;
import dev.decodiff.harness.testing.Checkpoint;
import dev.decodiff.harness.testing.DecodiffExtension;
import dev.decodiff.harness.testing.EngineRun;
import dev.decodiff.harness.testing.Reference;
import dev.decodiff.harness.testing.ReferenceDump;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static dev.decodiff.harness.testing.DecodiffAssertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The user-facing testing API (harness/testing): a golden test in a few lines, and what its failure says. */
@ExtendWith(DecodiffExtension.class)
class TestingApiTest {
    @Test
    void engineMatchesTheReference(@Checkpoint("gemma4-tiny") EngineRun run, @Reference("gemma4-tiny/long") ReferenceDump ref) {
        assertThat(run).matchesReference(ref);
    }

    @Test
    void aFaultFailsWithTheVerdictParagraph(@Checkpoint("gemma4-tiny") EngineRun run, @Reference("gemma4-tiny/long") ReferenceDump ref) {
        var faulty = run.withFaults(Fault.K_EQ_V_ROTATED_KEYS);
        assertThatThrownBy(() -> assertThat(faulty).withoutObserverCheck().matchesReference(ref))
                .isInstanceOf(AssertionError.class)
                .hasMessageStartingWith("Divergence at step 1 (decode, position ")
                .hasMessageContaining("attn.v_read")
                .hasMessageContaining("the values read back from the cache are the keys");
        int layer = CompareEndToEndTest.firstKEqVLayerOf(ref);
        assertThat(faulty).withoutObserverCheck().divergesFrom(ref, 1, "layers." + layer + ".attn.v_read");
    }
}
