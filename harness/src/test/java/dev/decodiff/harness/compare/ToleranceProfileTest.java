package dev.decodiff.harness.compare;

import dev.decodiff.harness.BadInputException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class ToleranceProfileTest {
    @TempDir
    Path tmp;

    @Test
    void defaultsPerKind() {
        var p = ToleranceProfile.defaults();
        assertThat(p.tolerance("layers.3.attn.v_read")).isEqualTo(1e-4);
        assertThat(p.tolerance("logits")).isEqualTo(1e-4);
        assertThat(p.tolerance("embed")).isEqualTo(1e-5);
        assertThat(p.tolerance("producer.special")).isEqualTo(1e-4);
        assertThat(p.nearTie()).isEqualTo(ToleranceProfile.DEFAULT_NEAR_TIE);
    }

    @Test
    void mostSpecificKeyWins() throws IOException {
        Path f = Files.writeString(tmp.resolve("p.json"), """
                {"default": 2e-4, "near_tie": 0.5,
                 "points": {"logits": 1e-3, "attn.out": 3e-4, "layers.5.*": 1e-2, "layers.5.attn.q": 5e-3}}""");
        var p = ToleranceProfile.load(f);
        assertThat(p.tolerance("logits")).isEqualTo(1e-3);
        assertThat(p.tolerance("layers.1.attn.out")).isEqualTo(3e-4);
        assertThat(p.tolerance("layers.5.attn.out")).isEqualTo(1e-2);
        assertThat(p.tolerance("layers.5.attn.q")).isEqualTo(5e-3);
        assertThat(p.tolerance("layers.1.mlp.out")).isEqualTo(2e-4);
        assertThat(p.tolerance("embed")).isEqualTo(1e-5);
        assertThat(p.nearTie()).isEqualTo(0.5);
    }

    @Test
    void builtInBf16ProfileAndCalibration() throws IOException {
        var bf16 = ToleranceProfile.bf16();
        assertThat(bf16.source()).isEqualTo("built-in bf16 noise floor");
        assertThat(bf16.tolerance("logits")).isGreaterThan(1e-2);
        assertThat(bf16.tolerance("embed")).isLessThan(bf16.tolerance("layers.0.out"));
        assertThat(bf16.nearTie()).isEqualTo(0.5);
        assertThat(ToleranceProfile.isHalfPrecision("bfloat16")).isTrue();
        assertThat(ToleranceProfile.isHalfPrecision("float32")).isFalse();
    }

    @Test
    void badProfilesNameTheFile() throws IOException {
        Path a = Files.writeString(tmp.resolve("a.json"), "{oops");
        assertThatThrownBy(() -> ToleranceProfile.load(a)).isInstanceOf(BadInputException.class).hasMessageContaining(a.toString());
        Path b = Files.writeString(tmp.resolve("b.json"), "{\"points\": {\"logits\": -1}}");
        assertThatThrownBy(() -> ToleranceProfile.load(b)).isInstanceOf(BadInputException.class).hasMessageContaining("positive");
        assertThatThrownBy(() -> ToleranceProfile.load(tmp.resolve("none.json"))).isInstanceOf(BadInputException.class);
    }

    private void assertRefused(String json, String... fragments) throws IOException {
        Path f = Files.writeString(tmp.resolve("bad.json"), json);
        assertThatThrownBy(() -> ToleranceProfile.load(f)).isInstanceOf(BadInputException.class)
                .hasMessageStartingWith(f.toString()).hasMessageContainingAll(fragments);
    }

    @Test
    void aMisspelledKeyIsRefusedWithTheNearestValidName() throws IOException {
        assertRefused("{\"defualt\": 1e-3}", "unknown key \"defualt\"", "did you mean \"default\"");
        assertRefused("{\"near-tie\": 0.1}", "did you mean \"near_tie\"");
        assertRefused("{\"point\": {\"logits\": 1e-3}}", "did you mean \"points\"");
        assertRefused("{\"points\": {\"attn.ot\": 1e-3}}", "unknown point \"attn.ot\"", "did you mean \"attn.out\"");
        assertRefused("{\"points\": {\"logit\": 1e-3}}", "did you mean \"logits\"");
        assertRefused("{\"points\": {\"layers.3.attn.vread\": 1e-3}}", "did you mean \"layers.3.attn.v_read\"");
        assertRefused("{\"near_tie\": 1e999}", "\"near_tie\" must be a finite number");
        assertRefused("{\"default\": 1e999}", "must be a positive number");
    }

    @Test
    void globsAndTheNotesCalibrateWritesAreAccepted() throws IOException {
        Path f = Files.writeString(tmp.resolve("ok.json"), """
                {"description": "x", "calibration": {"factor": 3}, "default": 1e-3,
                 "points": {"my.producer.*": 1e-2, "layers.2.moe.out": 1e-3, "ple": 1e-4}}""");
        var p = ToleranceProfile.load(f);
        assertThat(p.tolerance("my.producer.point")).isEqualTo(1e-2);
        assertThat(p.tolerance("layers.2.moe.out")).isEqualTo(1e-3);
    }
}
