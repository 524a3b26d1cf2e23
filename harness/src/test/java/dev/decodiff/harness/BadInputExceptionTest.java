package dev.decodiff.harness;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

class BadInputExceptionTest {
    @Test
    void aMessageQuotingDamagedBytesStaysOnePrintableLine() {
        String damaged = "f.gguf: metadata key 'gen\reral\u0085.na\u2028me\u0007' appears twice\n  (corrupted file?)";
        String line = BadInputException.oneLine(damaged);
        assertThat(line.lines()).hasSize(1);
        assertThat(line).doesNotContainPattern("\\p{Cntrl}")
                .isEqualTo("f.gguf: metadata key 'gen eral .na me\\u0007' appears twice (corrupted file?)");
    }

    @Test
    void jacksonsSourceSuffixIsDropped() {
        assertThat(BadInputException.oneLine("Duplicate field 'steps'\n at [Source: (File); line: 3]")).isEqualTo("Duplicate field 'steps'");
    }
}
