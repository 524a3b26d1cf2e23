package dev.decodiff.tests;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.engine.arch.Architectures;
import dev.decodiff.engine.Sampler;
import dev.decodiff.harness.testing.DecodiffAssertions;
import dev.decodiff.harness.testing.EngineRun;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The engine against transformers' own float32 runs of the same checkpoints: free-running greedy decode must
 * produce the reference's tokens, and teacher-forced logits must match at every step.
 */
class GoldenTokenTest {
    static final double LOGITS_TOLERANCE = 1e-4;

    static List<Path> cases() { return ReferenceCases.fp32Cases(); }

    private static JsonNode manifest(Path dir) throws Exception {
        return new ObjectMapper().readTree(dir.resolve("manifest.json").toFile());
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    void greedyDecodeReproducesTheReferenceTokens(Path caseDir) throws Exception {
        var m = manifest(caseDir);
        int promptLength = m.get("prompt_length").asInt();
        var tokens = new ArrayList<Integer>();
        m.get("tokens").forEach(t -> tokens.add(t.asInt()));
        int[] prompt = tokens.subList(0, promptLength).stream().mapToInt(Integer::intValue).toArray();
        var steps = m.get("steps");
        try (var model = Gemma4Model.load(ReferenceCases.checkpointOf(caseDir))) {
            var session = model.newSession();
            var generated = new ArrayList<Integer>();
            float[] logits = session.forward(prompt);
            for (int s = 0; s < steps.size(); s++) {
                int next = Sampler.argmax(logits);
                generated.add(next);
                if (s + 1 < steps.size()) logits = session.forward(new int[]{next});
            }
            var expected = new ArrayList<Integer>();
            steps.forEach(st -> expected.add(st.get("next_token").asInt()));
            assertThat(generated).as("greedy tokens of %s", caseDir).isEqualTo(expected);
        }
    }

    /**
     * Teacher-forced on the reference's tokens, every capture point at every step is within tolerance (logits:
     * 1e-4 rel L2), through the user-facing testing API.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    void teacherForcedEveryCapturePointMatches(Path caseDir) {
        try (var model = Architectures.load(ReferenceCases.checkpointOf(caseDir))) {
            var result = DecodiffAssertions.assertThat(EngineRun.of(model)).matchesReference(caseDir).result();
            double worstLogits = result.cells().stream().filter(c -> c.point().equals("logits")).mapToDouble(c -> c.relL2()).max().orElseThrow();
            assertThat(worstLogits).isLessThan(LOGITS_TOLERANCE);
            System.out.printf("golden %s: worst logits rel L2 %.3e, worst cell %s at step %d: %.3e%n",
                    caseDir.getParent().getFileName() + "/" + caseDir.getFileName(), worstLogits,
                    result.worstCell().point(), result.worstCell().step(), result.worstCell().relL2());
        }
    }

    static double relL2(float[] c, float[] r) {
        assertThat(c).hasSameSizeAs(r);
        double num = 0, den = 0;
        for (int i = 0; i < c.length; i++) {
            double d = (double) c[i] - r[i];
            num += d * d;
            den += (double) r[i] * r[i];
        }
        return Math.sqrt(num / den);
    }
}
