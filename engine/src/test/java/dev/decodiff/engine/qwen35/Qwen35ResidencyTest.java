package dev.decodiff.engine.qwen35;

import dev.decodiff.engine.Sampler;
import dev.decodiff.engine.WeightResidency;
import dev.decodiff.metal.HugePageMemory;
import dev.decodiff.metal.WeightMatrix;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.file.Path;
import java.util.ArrayList;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * Qwen3.5's weights copied onto huge pages give a prefill (across a 64-token chunk) and every decode step the logit bits
 * of the weights read from the file mapping, dense and MoE.
 */
class Qwen35ResidencyTest {
    @ParameterizedTest
    @ValueSource(strings = {"qwen35-tiny", "qwen35-tiny-moe"})
    void residentWeightsGiveTheMappedWeightsLogitBits(String checkpoint) {
        assumeTrue(HugePageMemory.available(), "this machine has no transparent huge pages");
        var dir = Path.of("..", "checkpoints", checkpoint);
        try (var mapped = Qwen35Model.load(dir, WeightResidency.Mode.MAPPED, -1);
             var resident = Qwen35Model.load(dir, WeightResidency.Mode.RESIDENT, -1)) {
            assertThat(resident.weightPlacement()).startsWith("resident");
            var copied = new ArrayList<WeightMatrix>();
            resident.weights().withStreamedMatrices(m -> {
                if (!m.data().isMapped()) copied.add(m);
                return m;
            });
            assertThat(copied).as("streamed matrices read from the huge-page copy").isNotEmpty();
            int vocab = mapped.config().vocabSize();
            int[] prompt = new int[70]; // across a 64-token chunk of the prefill
            for (int i = 0; i < prompt.length; i++) prompt[i] = (i * 7919 + 11) % vocab;
            var a = mapped.newSession(null);
            var b = resident.newSession(null);
            float[] la = a.forward(prompt), lb = b.forward(prompt);
            for (int step = 0; step < 5; step++) {
                for (int j = 0; j < la.length; j++)
                    assertThat(Float.floatToRawIntBits(lb[j])).as("%s step %d logit %d", checkpoint, step, j).isEqualTo(Float.floatToRawIntBits(la[j]));
                int next = Sampler.argmax(la);
                la = a.forward(new int[]{next});
                lb = b.forward(new int[]{next});
            }
        }
    }
}
