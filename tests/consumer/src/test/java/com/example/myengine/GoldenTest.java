package com.example.myengine;

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

/** What a decodiff user writes: golden tests of an engine against a transformers reference. */
@ExtendWith(DecodiffExtension.class)
class GoldenTest {
    @Test
    void theEngineMatchesTransformers(@Checkpoint("gemma4-tiny") EngineRun run, @Reference("gemma4-tiny/short") ReferenceDump ref) {
        assertThat(run).matchesReference(ref);
    }

    @Test
    void aBugIsNamedInTheFailure(@Checkpoint("gemma4-tiny") EngineRun run, @Reference("gemma4-tiny/short") ReferenceDump ref) {
        assertThatThrownBy(() -> assertThat(run.withFaults(Fault.SOFTCAP_MISSING)).withoutObserverCheck().matchesReference(ref))
                .isInstanceOf(AssertionError.class).hasMessageContaining("logits");
    }

    @Test
    void nd4jIsNotOnThisProjectsTestClassPath() {
        assertThatThrownBy(() -> Class.forName("org.nd4j.linalg.factory.Nd4j")).isInstanceOf(ClassNotFoundException.class);
    }
}
