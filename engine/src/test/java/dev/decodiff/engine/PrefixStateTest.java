package dev.decodiff.engine;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * {@link InferenceSession#forward(int[], int, java.util.function.Consumer)} hands over the state within a step: a
 * session restored from it and fed the step's remaining tokens must compute the bits the one pass computed (the
 * last position's logits), and decode on from there with the one-pass session's bits — across a sliding window (8
 * on these checkpoints), KV-shared layers, per-layer inputs and experts, and across a step long enough that its MLP runs in pieces of rows
 * (the one pass of 1,100 or 1,030 tokens in pieces, the resumed rest in one). The state is built from the pass's own rows,
 * so it must also differ from the state of another prompt (it is not the empty cache).
 */
class PrefixStateTest {
    private static int[] prompt(int vocab, int n, int salt) {
        int[] t = new int[n];
        for (int i = 0; i < n; i++) t[i] = (31 * i + 7 * salt + 3) % vocab;
        return t;
    }

    @ParameterizedTest
    @CsvSource({"gemma4-tiny,29,3", "gemma4-tiny,29,25", "gemma4-tiny,29,9", "gemma4-tiny-ple,21,13", "gemma4-tiny-ple-e2b,30,22",
            "gemma4-tiny-moe,33,17", "gemma4-tiny-moe,33,30", "gemma4-tiny,1100,1000", "gemma4-tiny-ple-e2b,1030,20"})
    void theRestOfAStepFromTheStateWithinItHasTheOnePassBits(String name, int length, int prefix) {
        try (var model = Gemma4Model.load(Path.of("..", "checkpoints", name))) {
            int[] tokens = prompt(model.config().vocabSize(), length, 1);
            var one = model.newSession(EngineOptions.defaults());
            KvSnapshot[] within = new KvSnapshot[1];
            float[] whole = one.forward(tokens, prefix, s -> within[0] = s);
            assertThat(within[0].tokens()).containsExactly(java.util.Arrays.copyOf(tokens, prefix));
            assertThat(one.position()).isEqualTo(length);

            var rest = model.newSession(EngineOptions.defaults());
            rest.restore(within[0]);
            float[] tail = rest.forward(java.util.Arrays.copyOfRange(tokens, prefix, length));
            assertThat(tail).containsExactly(whole);
            for (int s = 0; s < 10; s++) {
                int next = Sampler.argmax(whole);
                whole = one.forward(new int[]{next});
                assertThat(rest.forward(new int[]{next})).as("decode step %d", s).containsExactly(whole);
            }

            // the restored rows are this prompt's: another prompt's first tokens lead elsewhere
            var other = model.newSession(EngineOptions.defaults());
            other.forward(prompt(model.config().vocabSize(), length, 2), prefix, s -> within[0] = s);
            var wrong = model.newSession(EngineOptions.defaults());
            wrong.restore(within[0]);
            assertThat(wrong.forward(java.util.Arrays.copyOfRange(tokens, prefix, length))).isNotEqualTo(tail);
        }
    }

    @ParameterizedTest
    @CsvSource({"0", "5"})
    void aStateOutsideTheCallIsRefused(int prefix) {
        try (var model = Gemma4Model.load(Path.of("..", "checkpoints", "gemma4-tiny"))) {
            var session = model.newSession(EngineOptions.defaults());
            assertThatThrownBy(() -> session.forward(new int[]{1, 2, 3, 4, 5}, prefix, s -> {})).isInstanceOf(IllegalArgumentException.class);
            assertThat(session.position()).isZero();
        }
    }
}
