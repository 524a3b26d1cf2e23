package dev.decodiff.tests;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * bisect names the RoPE bug, not just "a rotation": it rotates the reference's q back with the model's tables and
 * finds the variant that reproduces the candidate (an off-by-one position, a RoPE variant).
 */
class RopeDiagnosisTest {
    private static String diagnosis(String fault) throws Exception {
        var r = Cli.run("bisect", ReferenceCases.repoRoot().resolve("reference-dumps/gemma4-tiny/long").toString(),
                "--fault", fault, "--no-ops", "--json");
        assertThat(r.code()).as(r.toString()).isEqualTo(1);
        return new ObjectMapper().readTree(r.out()).get("diagnosis").asText();
    }

    @Test
    void aDecodePositionOffByOneIsNamedAsSuch() throws Exception {
        assertThat(diagnosis("decode-position-off-by-one")).contains("layers.0.attn.q").contains("rotated at position p+1 instead of p");
    }

    @Test
    void proportionalRopeDoneAsAPrefixIsNamedWithItsPairs() throws Exception {
        // gemma4-tiny: full layers have d = 64 and partial_rotary_factor 0.25, so the bug rotates the first 16 dims.
        assertThat(diagnosis("rope-proportional-as-prefix")).contains("layers.2.attn.q")
                .contains("standard RoPE over its first 16 dims").contains("(j, j+32) for j < 8");
    }
}
