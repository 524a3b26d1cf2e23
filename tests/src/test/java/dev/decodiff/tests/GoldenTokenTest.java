package dev.decodiff.tests;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.engine.Sampler;
import dev.decodiff.metal.SafetensorsFile;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
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

    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    void teacherForcedLogitsMatchAtEveryStep(Path caseDir) throws Exception {
        var m = manifest(caseDir);
        int[] tokens = new int[m.get("tokens").size()];
        for (int i = 0; i < tokens.length; i++) tokens[i] = m.get("tokens").get(i).asInt();
        double worst = 0;
        try (var model = Gemma4Model.load(ReferenceCases.checkpointOf(caseDir))) {
            var session = model.newSession();
            for (var st : m.get("steps")) {
                int start = st.get("start").asInt(), length = st.get("length").asInt();
                float[] logits = session.forward(Arrays.copyOfRange(tokens, start, start + length));
                float[] ref;
                try (var f = SafetensorsFile.open(caseDir.resolve(st.get("file").asText()))) {
                    ref = f.get("logits").toFloats();
                }
                double rel = relL2(logits, ref);
                worst = Math.max(worst, rel);
                assertThat(rel).as("logits rel L2 at step %d of %s", st.get("index").asInt(), caseDir).isLessThan(LOGITS_TOLERANCE);
            }
        }
        System.out.printf("golden %s: worst logits rel L2 %.3e%n", caseDir.getParent().getFileName() + "/" + caseDir.getFileName(), worst);
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
