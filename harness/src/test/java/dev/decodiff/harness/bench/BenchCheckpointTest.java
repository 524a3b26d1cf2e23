package dev.decodiff.harness.bench;

import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.engine.LayerType;
import dev.decodiff.metal.SafetensorsFile;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The real-shape presets synthesize checkpoints the engine reads as the released configs say, checked at a narrow
 * width (the layer structure is what matters here, not the size).
 */
class BenchCheckpointTest {
    private static final String NARROW = ",hidden=64,ffn=64,vocab=512,head_dim=16,global_head_dim=32";

    @Test
    void theE2bPresetHasThirtyFiveLayersWithPleAndTheLastTwentySharingKeysAsTheSpecSays(@TempDir Path cache) throws Exception {
        var spec = BenchSpec.parse("e2b" + NARROW + ",ple=8");
        Path dir = BenchCheckpoint.ensure(spec, cache, s -> {});
        try (var m = Gemma4Model.load(dir)) {
            var c = m.config();
            assertThat(c.numLayers()).isEqualTo(35);
            assertThat(c.pleDim()).isEqualTo(8);
            // the Gemma 4 spec's E2B example: L=35, [S,S,S,S,F]×7, N=20: shared sliding layers read layer 13, full ones 14
            for (var l : c.layers()) {
                assertThat(l.type()).as("layer %d", l.index()).isEqualTo((l.index() + 1) % 5 == 0 ? LayerType.FULL : LayerType.SLIDING);
                if (l.index() < 15) assertThat(l.kvShared()).isFalse();
                else assertThat(l.kvSource()).as("layer %d", l.index()).isEqualTo(l.type() == LayerType.FULL ? 14 : 13);
                assertThat(l.intermediate()).as("layer %d", l.index()).isEqualTo(l.index() >= 15 ? 128 : 64); // double-wide MLP
                assertThat(l.kEqV()).isFalse();
            }
            assertStoredAsCountedAndRuns(spec, dir, m);
        }
    }

    @Test
    void theMoePresetHasTheReleasedWidthWithExpertsBesideTheDenseMlp(@TempDir Path cache) throws Exception {
        var spec = BenchSpec.parse("26b-a4b" + NARROW + ",experts=8,top_k=2,moe_ffn=32");
        Path dir = BenchCheckpoint.ensure(spec, cache, s -> {});
        try (var m = Gemma4Model.load(dir)) {
            var c = m.config();
            assertThat(c.moe()).isTrue();
            assertThat(c.numExperts()).isEqualTo(8);
            assertThat(c.topKExperts()).isEqualTo(2);
            assertThat(c.layer(0).type()).isEqualTo(LayerType.SLIDING);
            assertThat(c.layer(0).kvHeads()).isEqualTo(8);
            assertThat(c.layer(1).type()).isEqualTo(LayerType.FULL);
            assertThat(c.layer(1).kEqV()).isTrue();
            assertThat(c.layer(1).kvHeads()).isEqualTo(2);
            assertStoredAsCountedAndRuns(spec, dir, m);
        }
    }

    @Test
    void theDefaultModelKeepsTheCacheKeyItHadBeforeTheRealShapes() {
        assertThat(BenchSpec.DEFAULT.key()).isEqualTo("gemma4-h1536-l18-nh8-kv1-d256-512-ffn6144-v262144-w512-s1");
        assertThat(BenchSpec.DEFAULT.parameters()).isBetween(1_050_000_000L, 1_070_000_000L); // the 1.06 B model
    }

    /** The file holds as many parameters as the spec counts, and a forward pass gives finite logits. */
    private static void assertStoredAsCountedAndRuns(BenchSpec spec, Path dir, Gemma4Model m) throws Exception {
        assertThat(storedParameters(dir)).isEqualTo(spec.parameters());
        float[] logits = m.newSession().forward(new int[]{2, 7, 9});
        assertThat(logits).hasSize(512);
        for (float x : logits) assertThat(x).isFinite();
    }

    private static long storedParameters(Path dir) throws Exception {
        try (var f = SafetensorsFile.open(dir.resolve("model.safetensors"))) {
            long n = 0;
            for (var t : f.tensors().values()) n += t.elementCount();
            return n;
        }
    }
}
