package dev.decodiff.tests;

import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.Fault;
import dev.decodiff.engine.KvType;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.engine.arch.LoadedModel;
import dev.decodiff.harness.testing.Checkpoint;
import dev.decodiff.harness.testing.DecodiffExtension;
import dev.decodiff.harness.testing.EngineRun;
import dev.decodiff.harness.testing.Reference;
import dev.decodiff.harness.testing.ReferenceDump;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static dev.decodiff.harness.testing.DecodiffAssertions.assertThat;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The JUnit API on every bundled architecture: a Qwen3.5 and a Llama-family checkpoint judged like Gemma 4's. */
@ExtendWith(DecodiffExtension.class)
class ArchitecturesTestingApiTest {
    @Test
    void aQwen35CheckpointMatchesItsReference(@Checkpoint("qwen35-tiny") EngineRun run, @Reference("qwen35-tiny/short") ReferenceDump ref) {
        assertThat(run).matchesReference(ref);
        assertThat(run.options()).as("Qwen3.5 runs through the seam: catalog faults only").isNull();
    }

    @Test
    void aLlamaCheckpointMatchesItsReference(@Checkpoint("llama-tiny") EngineRun run, @Reference("llama-tiny/short") ReferenceDump ref) {
        assertThat(run).matchesReference(ref);
    }

    @Test
    void aPlantedQwen35FaultFailsNamingItsCell(@Checkpoint("qwen35-tiny") EngineRun run, @Reference("qwen35-tiny/short") ReferenceDump ref) {
        var faulty = run.withFaults("conv-state-not-carried");
        assertThat(faulty.faults()).containsExactly("conv-state-not-carried");
        assertThatThrownBy(() -> assertThat(faulty).withoutObserverCheck().matchesReference(ref))
                .isInstanceOf(AssertionError.class)
                .hasMessageStartingWith("Divergence at step 1 (decode, position ")
                .hasMessageContaining("layers.0.linear.conv_state_read");
        assertThat(faulty).withoutObserverCheck().divergesFrom(ref, 1, "layers.0.linear.conv_state_read");
    }

    @Test
    void aFaultOutsideTheCatalogIsRefusedNamingIt(@Checkpoint("qwen35-tiny") EngineRun qwen, @Checkpoint("llama-tiny") EngineRun llama) {
        assertThatThrownBy(() -> qwen.withFaults("no-such-fault"))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("Qwen3.5's catalog").hasMessageContaining("conv-state-not-carried");
        assertThatThrownBy(() -> qwen.withFaults(Fault.SOFTCAP_MISSING))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("softcap-missing");
        assertThatThrownBy(() -> llama.withFaults("conv-state-not-carried")).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void engineOptionsGoOnlyToAFamilyWhoseEngineTakesThem(@Checkpoint("gemma4-tiny") EngineRun gemma, @Checkpoint("qwen35-tiny") EngineRun qwen) {
        var bf16 = EngineOptions.defaults().withKvTypes(KvType.BF16, KvType.BF16);
        assertThat(gemma.withFaults("ring-wrap").withEngineOptions(bf16).options().keyType()).isEqualTo(KvType.BF16);
        assertThat(gemma.withFaults("ring-wrap").withEngineOptions(bf16).faults()).containsExactly("ring-wrap");
        assertThatThrownBy(() -> qwen.withEngineOptions(bf16)).isInstanceOf(IllegalStateException.class);
    }

    @Test
    void aCheckpointResolvesAsTheSeamsModelOrAsItsFamilysOwn(@Checkpoint("qwen35-tiny") LoadedModel qwen, @Checkpoint("gemma4-tiny") LoadedModel gemma,
                                                             @Checkpoint("gemma4-tiny") Gemma4Model own) {
        assertThat(qwen.architecture().name()).isEqualTo("Qwen3.5");
        assertThat(gemma.architecture().name()).isEqualTo("Gemma 4");
        assertThat(own.directory()).isEqualTo(gemma.directory());
    }
}
