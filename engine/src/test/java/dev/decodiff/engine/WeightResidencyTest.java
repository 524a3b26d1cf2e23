package dev.decodiff.engine;

import dev.decodiff.metal.HugePageMemory;
import dev.decodiff.metal.WeightMatrix;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * Weights copied onto huge pages must be the checkpoint's bytes, read from the copy (not the file mapping), and give
 * every result the bits the mapped weights give. (The golden tests hold the default placement to transformers.)
 */
class WeightResidencyTest {
    private static final Path TINY = Path.of("..", "checkpoints", "gemma4-tiny");
    private static final Path MOE = Path.of("..", "checkpoints", "gemma4-tiny-moe");

    private static List<WeightMatrix> matrices(ModelWeights w) {
        var out = new ArrayList<WeightMatrix>();
        w.withStreamedMatrices(m -> {
            out.add(m);
            return m;
        });
        return out;
    }

    @Test
    void residentWeightsAreCopiesOfTheMappedBytesAndGiveTheSameLogitBits() {
        assumeTrue(HugePageMemory.available(), "this machine has no transparent huge pages");
        int[] prompt = {2, 105, 2364, 107, 818, 5279, 529, 9405};
        for (var dir : List.of(TINY, MOE)) {
            try (var mapped = Gemma4Model.load(dir, WeightResidency.Mode.MAPPED);
                 var resident = Gemma4Model.load(dir, WeightResidency.Mode.RESIDENT)) {
                assertThat(mapped.weightPlacement()).startsWith("mapped");
                assertThat(resident.weightPlacement()).startsWith("resident");
                var a = matrices(mapped.weights());
                var b = matrices(resident.weights());
                assertThat(b).hasSameSizeAs(a);
                for (int i = 0; i < a.size(); i++) {
                    var m = a.get(i);
                    var r = b.get(i);
                    assertThat(r.name()).isEqualTo(m.name());
                    assertThat(r.data().address()).as("%s is read from the copy", m.name()).isNotEqualTo(m.data().address());
                    assertThat(r.data().mismatch(m.data())).as("%s bytes", m.name()).isEqualTo(-1L);
                }
                assertThat(resident.weights().lmHead() == resident.weights().embed()).isEqualTo(mapped.weights().lmHead() == mapped.weights().embed());
                int vocab = mapped.config().vocabSize();
                int[] ids = prompt.clone();
                for (int i = 0; i < ids.length; i++) ids[i] %= vocab;
                var s1 = mapped.newSession();
                var s2 = resident.newSession();
                float[] l1 = s1.forward(ids), l2 = s2.forward(ids);
                for (int step = 0; step < 3; step++) {
                    for (int j = 0; j < l1.length; j++)
                        assertThat(Float.floatToRawIntBits(l2[j])).as("%s logit %d", dir, j).isEqualTo(Float.floatToRawIntBits(l1[j]));
                    int next = Sampler.argmax(l1);
                    l1 = s1.forward(new int[]{next});
                    l2 = s2.forward(new int[]{next});
                }
            }
        }
    }

    @Test
    void mappedWeightsStayViewsOfTheFiles() {
        try (var model = Gemma4Model.load(TINY, WeightResidency.Mode.MAPPED)) {
            assertThat(model.weightPlacement()).startsWith("mapped from the checkpoint files");
            var again = ModelWeights.load(model.files(), model.config());
            var a = matrices(model.weights());
            var b = matrices(again);
            for (int i = 0; i < a.size(); i++) assertThat(a.get(i).data().address()).isEqualTo(b.get(i).data().address());
        }
    }

    @Test
    void autoKeepsTheMappingForARunOfFewDecodeTokensAndCopiesForALongOne() {
        assumeTrue(HugePageMemory.available(), "this machine has no transparent huge pages");
        long few = WeightResidency.COPY_FROM_DECODE_TOKENS - 1, enough = WeightResidency.COPY_FROM_DECODE_TOKENS;
        try (var shortRun = Gemma4Model.load(TINY, WeightResidency.Mode.AUTO, few);
             var noDecode = Gemma4Model.load(TINY, WeightResidency.Mode.AUTO, 0);
             var longRun = Gemma4Model.load(TINY, WeightResidency.Mode.AUTO, enough);
             var unknown = Gemma4Model.load(TINY, WeightResidency.Mode.AUTO, -1);
             var insisted = Gemma4Model.load(TINY, WeightResidency.Mode.RESIDENT, 0)) {
            assertThat(shortRun.weightsResident()).isFalse();
            assertThat(shortRun.weightPlacement()).startsWith("mapped from the checkpoint files").contains(few + " decode tokens");
            assertThat(noDecode.weightsResident()).isFalse();
            assertThat(longRun.weightsResident()).isTrue();
            assertThat(unknown.weightsResident()).as("a run whose length is unknown copies, as before").isTrue();
            assertThat(insisted.weightsResident()).as("resident copies whatever the run").isTrue();
            var mapped = ModelWeights.load(shortRun.files(), shortRun.config());
            var a = matrices(shortRun.weights());
            var b = matrices(mapped);
            for (int i = 0; i < a.size(); i++) assertThat(a.get(i).data().address()).isEqualTo(b.get(i).data().address());
        }
    }

    @Test
    void anUnknownPlacementIsRefusedWithTheValidValues() {
        String old = System.getProperty("decodiff.weights");
        System.setProperty("decodiff.weights", "onheap");
        try {
            assertThatThrownBy(WeightResidency::configured).hasMessageContaining("onheap").hasMessageContaining("auto, mapped or resident");
        } finally {
            if (old == null) System.clearProperty("decodiff.weights");
            else System.setProperty("decodiff.weights", old);
        }
    }
}
