package dev.decodiff.llamacpp.gguf;

import org.junit.jupiter.api.Test;

import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * transformers' source of a KV-shared layer is the last non-shared layer of its type (modeling_gemma4.py); llama.cpp
 * v0.5.0 takes layer (first shared − 2) for sliding and (first shared − 1) for full layers (llama-model.cpp).
 */
class KvSharingTest {
    private static final boolean S = true, F = false;

    @Test
    void e2bsLayoutEndsSlidingThenFullBeforeTheSharedLayersSoBothAgree() {
        // E2B: 35 layers [S,S,S,S,F]×7, 20 shared: non-shared 0…14 end with 13 = S, 14 = F
        var types = new java.util.ArrayList<Boolean>();
        for (int i = 0; i < 35; i++) types.add((i + 1) % 5 != 0);
        assertThat(KvSharing.llamaCppMismatches(types, 20)).isEmpty();
    }

    @Test
    void theBundledPleCheckpointPairsEachSharedLayerWithACacheOfTheOtherTypeInLlamaCpp() {
        // gemma4-tiny-ple: S S F S | S F shared — transformers reads 3 (S) and 2 (F); llama.cpp 2 and 3
        assertThat(KvSharing.llamaCppMismatches(List.of(S, S, F, S, S, F), 2)).containsExactly(
                new KvSharing.Mismatch(4, 3, 2, true), new KvSharing.Mismatch(5, 2, 3, true));
    }

    @Test
    void aSameTypeButWrongSourceIsReportedAsSilentNotAsAnAbort() {
        // S F S S | S F: layer 4 (S) reads 3 in transformers, 2 (also S) in llama.cpp; layer 5 (F) reads 1 vs 3 (S)
        assertThat(KvSharing.llamaCppMismatches(List.of(S, F, S, S, S, F), 2)).containsExactly(
                new KvSharing.Mismatch(4, 3, 2, false), new KvSharing.Mismatch(5, 1, 3, true));
    }

    @Test
    void aModelWithoutSharedLayersHasNothingToPair() {
        assertThat(KvSharing.llamaCppMismatches(List.of(S, S, F, S, S, F), 0)).isEmpty();
    }
}
