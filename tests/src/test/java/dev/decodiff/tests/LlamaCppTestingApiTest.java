package dev.decodiff.tests;

import dev.decodiff.harness.testing.DecodiffAssertions;
import dev.decodiff.harness.testing.EngineRun;
import dev.decodiff.harness.testing.ReferenceDump;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The JUnit/AssertJ API with llama.cpp as the engine under test: what a llama.cpp porter writes in their own tests. */
class LlamaCppTestingApiTest {
    @Test
    void aLlamaCppRunIsJudgedLikeAnEngineRunAndFailsWithTheVerdict() {
        LlamaCppSetUp.assumeAvailable();
        var root = ReferenceCases.repoRoot();
        var run = EngineRun.llamaCppOf(root.resolve("checkpoints/gemma4-tiny"));
        var ref = ReferenceDump.open(root.resolve("reference-dumps/gemma4-tiny/short"));
        // the documented first divergence (fp16 GELU in ggml-cpu)
        var result = DecodiffAssertions.assertThat(run).divergesFrom(ref, 0, "layers.0.mlp.out").result();
        assertThat(result.observerEffect()).isEqualTo("none");
        // under the fp32 tolerances it does not match, and says where
        assertThatThrownBy(() -> DecodiffAssertions.assertThat(run).withoutObserverCheck().matchesReference(ref))
                .isInstanceOf(AssertionError.class).hasMessageContaining("layers.0.mlp.out");
        // the bf16 reference under its noise floor: a match
        DecodiffAssertions.assertThat(run).withoutObserverCheck().matchesReference(ReferenceDump.open(root.resolve("reference-dumps/gemma4-tiny/long-bf16")));
    }
}
