package dev.decodiff.harness.compare;

import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.SyntheticDump;
import dev.decodiff.harness.dump.CapturedTensor;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;

import static dev.decodiff.harness.SyntheticDump.D;
import static dev.decodiff.harness.SyntheticDump.NH;
import static dev.decodiff.harness.SyntheticDump.NKV;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class ComparisonTest {
    @TempDir
    Path tmp;
    Path ref;

    @BeforeEach
    void reference() { ref = SyntheticDump.write(tmp.resolve("ref"), SyntheticDump.NONE); }

    private ComparisonResult compare(SyntheticDump.Mutation m) { return compare(m, Comparison.Options.defaults()); }

    private ComparisonResult compare(SyntheticDump.Mutation m, Comparison.Options o) {
        Path cand = SyntheticDump.write(tmp.resolve("cand"), m);
        return Comparison.compareDumps(ref, cand, o);
    }

    private static SyntheticDump.Mutation at(int step, String point, java.util.function.BiConsumer<float[], java.util.Map<String, CapturedTensor>> f) {
        return (s, t) -> { if (s == step) f.accept(t.get(point).data(), t); };
    }

    @Test
    void identicalDumpsMatch() {
        var r = compare(SyntheticDump.NONE);
        assertThat(r.matches()).isTrue();
        assertThat(r.verdict()).isEqualTo("match");
        assertThat(r.exitCode()).isZero();
        assertThat(r.stepsCompared()).isEqualTo(SyntheticDump.STEPS);
        int perStep = 1 + SyntheticDump.LAYERS * 8 + 2;
        assertThat(r.cells()).hasSize(SyntheticDump.STEPS * perStep);
        assertThat(r.tokens()).allMatch(t -> t.status() == TokenAgreement.Status.AGREE);
        assertThat(r.onlyInReference()).isEmpty();
        assertThat(r.observerEffect()).isEqualTo(ComparisonResult.NOT_APPLICABLE);
        assertThat(r.cells().getFirst().point()).isEqualTo("embed");
        assertThat(r.cells().get(1).point()).isEqualTo("layers.0.attn.q");
    }

    @Test
    void firstDivergenceIsTheFirstFailingCellInCausalOrder() {
        var r = compare((s, t) -> {
            if (s == 2) {
                var a = t.get("layers.1.attn.out").data();
                a[3] += 0.05f;
                t.get("layers.2.mlp.out").data()[0] += 1f;  // later in the same step
                t.get("layers.0.out").data()[0] += 0f;
            }
            if (s == 3) t.get("embed").data()[0] += 1f;    // later step
        });
        var fd = r.firstDivergence();
        assertThat(fd).isNotNull();
        assertThat(fd.step()).isEqualTo(2);
        assertThat(fd.point()).isEqualTo("layers.1.attn.out");
        assertThat(fd.layer()).isEqualTo(1);
        assertThat(fd.upstream()).extracting(CellStats::point)
                .containsExactly("layers.1.attn.k", "layers.1.attn.v", "layers.1.attn.k_read", "layers.1.attn.v_read");
        assertThat(fd.upstream()).allMatch(CellStats::passed);
        assertThat(fd.cell().maxIndexND()).containsExactly(0, 3);
        assertThat(r.failingCells()).isEqualTo(3);
        assertThat(r.exitCode()).isEqualTo(1);
    }

    @Test
    void valuesEqualToKeysAreNamed() {
        var r = compare((s, t) -> {
            if (s == 1) {
                var k = t.get("layers.2.attn.k_read");
                t.put("layers.2.attn.v_read", new CapturedTensor("layers.2.attn.v_read", k.shape(), k.data().clone()));
            }
        });
        var fd = r.firstDivergence();
        assertThat(fd.step()).isEqualTo(1);
        assertThat(fd.point()).isEqualTo("layers.2.attn.v_read");
        assertThat(fd.diagnosis()).contains("bit-identical to the reference's layers.2.attn.k_read")
                .contains("the values read back from the cache are the keys");
    }

    @Test
    void constantScaleFactor() {
        var r = compare(at(0, "layers.0.attn.out", (a, t) -> { for (int i = 0; i < a.length; i++) a[i] *= 16.5f; }));
        assertThat(r.firstDivergence().diagnosis()).contains("constant scale factor").contains("16.5 × reference");
        assertThat(Diagnosis.namedFactor(Math.sqrt(2))).isEqualTo(" = √2");
        assertThat(Diagnosis.namedFactor(1 / Math.sqrt(256))).isEqualTo(" = 1/16");
        assertThat(Diagnosis.namedFactor(1 / Math.sqrt(512))).isEqualTo(" = 1/√512");
        assertThat(Diagnosis.namedFactor(16.5)).isEmpty();
    }

    @Test
    void offByOnePositionAlongTheReadAxis() {
        var r = compare(at(2, "layers.1.attn.k_read", (a, t) -> {
            int row = NKV * D, rows = a.length / row;
            System.arraycopy(a.clone(), row, a, 0, (rows - 1) * row); // row i <- row i+1
        }));
        assertThat(r.firstDivergence().point()).isEqualTo("layers.1.attn.k_read");
        assertThat(r.firstDivergence().diagnosis()).contains("off by one position").contains("i+1");
    }

    @Test
    void rowsOfTheReadWindowInTheWrongOrder() {
        var r = compare(at(3, "layers.2.attn.v_read", (a, t) -> {
            int row = NKV * D;
            var b = a.clone();
            System.arraycopy(b, 0, a, 2 * row, row);      // row 2 <- row 0
            System.arraycopy(b, 2 * row, a, 0, row);      // row 0 <- row 2
        }));
        assertThat(r.firstDivergence().diagnosis()).contains("wrong order").contains("row 0 (position 0) holds position 2");
    }

    @Test
    void aRotationKeepsEveryVectorsNorm() {
        var r = compare(at(1, "layers.0.attn.q", (a, t) -> {
            for (int v = 0; v < a.length / D; v++)
                for (int k = 0; k < D / 2; k++) {   // rotate pairs (k, k+D/2) by 0.3 rad
                    float x = a[v * D + k], y = a[v * D + k + D / 2];
                    a[v * D + k] = (float) (x * Math.cos(0.3) - y * Math.sin(0.3));
                    a[v * D + k + D / 2] = (float) (x * Math.sin(0.3) + y * Math.cos(0.3));
                }
        }));
        assertThat(r.firstDivergence().diagnosis()).contains("4 of 4 [8] vectors keep the reference's norm").contains("RoPE");
    }

    @Test
    void aLayerReadingAnotherLayersCache() {
        var r = compare((s, t) -> {
            if (s == 2) {
                var other = t.get("layers.0.attn.k_read");
                t.put("layers.2.attn.k_read", new CapturedTensor("layers.2.attn.k_read", other.shape(), other.data().clone()));
            }
        });
        assertThat(r.firstDivergence().point()).isEqualTo("layers.2.attn.k_read");
        assertThat(r.firstDivergence().diagnosis()).contains("layer 2 reads layer 0's cache");
    }

    @Test
    void perVectorScaleMeansAMissingNorm() {
        var r = compare(at(0, "layers.1.attn.v", (a, t) -> {
            for (int v = 0; v < a.length / D; v++) for (int k = 0; k < D; k++) a[v * D + k] *= 1 + 0.1f * v;
        }));
        assertThat(r.firstDivergence().diagnosis()).contains("each [8] vector").contains("normalisation");
    }

    @Test
    void missingSoftcap() {
        // reference logits = 30·tanh(x/30) of the candidate's
        ref = SyntheticDump.write(tmp.resolve("capped"), (s, t) -> {
            var a = t.get("logits").data();
            for (int i = 0; i < a.length; i++) a[i] = (float) (30 * Math.tanh(4 * a[i] / 30));
        });
        Path cand = SyntheticDump.write(tmp.resolve("raw"), (s, t) -> {
            var a = t.get("logits").data();
            for (int i = 0; i < a.length; i++) a[i] = 4 * a[i];
        });
        var r = Comparison.compareDumps(ref, cand, Comparison.Options.defaults());
        assertThat(r.firstDivergence().point()).isEqualTo("logits");
        assertThat(r.firstDivergence().diagnosis()).contains("soft-cap is missing").contains("30·tanh(candidate / 30)");
    }

    @Test
    void readingOneExtraPositionIsADivergenceNotBadInput() {
        var r = compare((s, t) -> {
            if (s == 3) {
                var k = t.get("layers.0.attn.k_read");
                var extra = new float[k.data().length + NKV * D];
                System.arraycopy(k.data(), 0, extra, NKV * D, k.data().length);
                long[] shape = k.shape().clone();
                shape[0]++;
                t.put(k.point(), new CapturedTensor(k.point(), shape, extra));
            }
        });
        var fd = r.firstDivergence();
        assertThat(fd.point()).isEqualTo("layers.0.attn.k_read");
        assertThat(fd.cell().shapeNote()).contains("reads 9 positions where the reference reads 8");
        assertThat(fd.diagnosis()).contains("also reads 1 older one").contains("off by one");
    }

    @Test
    void permutedHeads() {
        var r = compare(at(0, "layers.1.attn.q", (a, t) -> {
            var b = a.clone();
            int T = a.length / (NH * D);
            for (int tt = 0; tt < T; tt++) {
                System.arraycopy(b, (tt * NH) * D, a, (tt * NH + 1) * D, D);
                System.arraycopy(b, (tt * NH + 1) * D, a, (tt * NH) * D, D);
            }
        }));
        assertThat(r.firstDivergence().diagnosis()).contains("heads permuted").contains("[1, 0, 2, 3]");
    }

    @Test
    void swappedAxes() {
        var r = compare(at(0, "layers.0.attn.q", (a, t) -> {
            var b = a.clone();
            int T = a.length / (NH * D);
            for (int tt = 0; tt < T; tt++)
                for (int h = 0; h < NH; h++) System.arraycopy(b, (tt * NH + h) * D, a, (h * T + tt) * D, D);
        }));
        assertThat(r.firstDivergence().diagnosis()).contains("layout transform").contains("[4, 5, 8]");
    }

    @Test
    void nanInTheCandidateIsAFailureWithItsPosition() {
        var r = compare(at(1, "layers.2.out", (a, t) -> a[5] = Float.NaN));
        var fd = r.firstDivergence();
        assertThat(fd.point()).isEqualTo("layers.2.out");
        assertThat(fd.cell().nonFinite()).isEqualTo(1);
        assertThat(fd.diagnosis()).contains("1 NaN/Inf value").contains("[0, 5]");
        assertThat(r.matches()).isFalse();
    }

    @Test
    void nanInTheReferenceIsBadInput() {
        Path badRef = SyntheticDump.write(tmp.resolve("nanref"), at(2, "logits", (a, t) -> a[0] = Float.POSITIVE_INFINITY));
        Path cand = SyntheticDump.write(tmp.resolve("cand"), SyntheticDump.NONE);
        assertThatThrownBy(() -> Comparison.compareDumps(badRef, cand, Comparison.Options.defaults()))
                .isInstanceOf(BadInputException.class)
                .hasMessageContaining(badRef.resolve("step-0002.safetensors").toString())
                .hasMessageContaining("NaN/Inf");
    }

    @Test
    void shapeMismatchIsBadInput() {
        assertThatThrownBy(() -> compare((s, t) -> {
            if (s == 0) {
                var o = t.get("layers.0.mlp.out");
                t.put(o.point(), new CapturedTensor(o.point(), new long[]{o.data().length}, o.data()));
            }
        })).isInstanceOf(BadInputException.class)
                .hasMessageContaining(tmp.resolve("cand").resolve("step-0000.safetensors").toString())
                .hasMessageContaining("layers.0.mlp.out");
    }

    @Test
    void nearTieFlipIsNotAFailureButAClearFlipIs() {
        // step 1: reference's top-2 margin 1e-4; the candidate picks the runner-up
        SyntheticDump.Mutation nearTie = (s, t) -> {
            if (s == 1) {
                var a = t.get("logits").data();
                a[40] = 10f - 1e-4f;
            }
        };
        ref = SyntheticDump.write(tmp.resolve("ref-tie"), nearTie);
        Path cand = SyntheticDump.write(tmp.resolve("cand-tie"), (s, t) -> {
            nearTie.apply(s, t);
            if (s == 1) {
                var a = t.get("logits").data();
                a[40] = 10f;
                a[14] = 10f - 1e-4f;
            }
        });
        var r = Comparison.compareDumps(ref, cand, Comparison.Options.defaults());
        assertThat(r.tokens().get(1).status()).isEqualTo(TokenAgreement.Status.NEAR_TIE);
        assertThat(r.matches()).isTrue();
        // the same flip with a threshold below the margin is a failure at the logits of that step
        var strict = new Comparison.Options(ToleranceProfile.defaults().withNearTie(1e-5), false, null);
        var r2 = Comparison.compareDumps(ref, cand, strict);
        assertThat(r2.firstDivergence().step()).isEqualTo(1);
        assertThat(r2.firstDivergence().point()).isEqualTo("logits");
        assertThat(r2.firstDivergence().token()).isNotNull();
        assertThat(r2.firstDivergence().diagnosis()).contains("greedy token flips");
    }

    @Test
    void pointsOnOneSideOnlyAreListed() {
        var r = compare((s, t) -> {
            t.remove("layers.1.mlp.out");
            t.put("layers.0.attn.extra", new CapturedTensor("layers.0.attn.extra", new long[]{1}, new float[]{1}));
        });
        assertThat(r.onlyInReference()).containsExactly("layers.1.mlp.out");
        assertThat(r.onlyInCandidate()).containsExactly("layers.0.attn.extra");
        assertThat(r.matches()).isFalse();
        assertThat(r.verdict()).isEqualTo("incomplete");
        assertThat(r.exitCode()).isEqualTo(3);
        assertThat(r.completeness().reasons())
                .anyMatch(m -> m.contains("the candidate lacks 1 point") && m.contains("layers.1.mlp.out"))
                .noneMatch(m -> m.contains("layers.0.attn.extra"));
    }

    @Test
    void pointsOnlyTheCandidateHoldsAreListedButTheReferenceDecidesCompleteness() {
        var r = compare((s, t) -> t.put("layers.0.attn.extra", new CapturedTensor("layers.0.attn.extra", new long[]{1}, new float[]{1})));
        assertThat(r.onlyInCandidate()).containsExactly("layers.0.attn.extra");
        assertThat(r.completeness().pointsOnlyInCandidate()).containsExactly("layers.0.attn.extra");
        assertThat(r.completeness().complete()).isTrue();
        assertThat(r.completeness().reasons()).isEmpty();
        assertThat(r.exitCode()).isZero();
    }

    private Path cutShort(String name, int steps) { return SyntheticDump.unfinished(tmp.resolve(name), steps); }

    @Test
    void aCandidateCutShortIsIncompleteNotAMatch() throws IOException {
        Path cand = cutShort("killed", 2);
        var r = Comparison.compareDumps(ref, cand, Comparison.Options.defaults());
        assertThat(r.failingCells()).isZero();
        assertThat(r.verdict()).isEqualTo("incomplete");
        assertThat(r.exitCode()).isEqualTo(3);
        assertThat(r.completeness().reasons())
                .anyMatch(m -> m.contains("the candidate has 2 of the reference's 4 steps") && m.contains("steps 2–3 not compared"))
                .anyMatch(m -> m.startsWith("candidate: " + cand) && m.contains("no completeness mark"));
    }

    @Test
    void aReferenceCutShortIsIncompleteAndTheCandidatesExtraStepsAreNamed() throws IOException {
        Path shortRef = cutShort("short-ref", 2);
        var r = Comparison.compareDumps(shortRef, ref, Comparison.Options.defaults());
        assertThat(r.stepsCompared()).isEqualTo(2);
        assertThat(r.exitCode()).isEqualTo(3);
        assertThat(r.completeness().reasons())
                .anyMatch(m -> m.contains("the candidate has 4 steps but the reference only 2") && m.contains("steps 2–3"))
                .anyMatch(m -> m.startsWith("reference: " + shortRef) && m.contains("re-create the dump"));
    }

    @Test
    void allStepsWithoutTheCompletenessMarkAreStillIncomplete() throws IOException {
        Path cand = cutShort("unmarked", SyntheticDump.STEPS);
        var r = Comparison.compareDumps(ref, cand, Comparison.Options.defaults());
        assertThat(r.completeness().candidateSteps()).isEqualTo(SyntheticDump.STEPS);
        assertThat(r.verdict()).isEqualTo("incomplete");
        assertThat(r.completeness().gaps()).singleElement().asString().contains("no completeness mark");
    }

    @Test
    void aDivergenceWinsOverIncompletenessAndTheReportStillSaysWhatWasMissing() throws IOException {
        Path cand = SyntheticDump.write(tmp.resolve("bad-short"), at(1, "layers.2.out", (a, t) -> a[0] += 100),
                SyntheticDump.CONFIG_SHA, SyntheticDump.tokens(), 3);
        var r = Comparison.compareDumps(ref, cand, Comparison.Options.defaults());
        assertThat(r.verdict()).isEqualTo("divergence");
        assertThat(r.exitCode()).isEqualTo(1);
        assertThat(r.complete()).isFalse();
        assertThat(r.completeness().reasons()).anyMatch(m -> m.contains("3 of the reference's 4 steps"));
    }

    /** A candidate that recorded only --points layers.2.*,logits; at step {@code gapAt} it also lost layers.2.mlp.out. */
    private Path layer2AndLogits(String name, int gapAt) {
        Path cand = SyntheticDump.write(tmp.resolve(name), (s, t) -> {
            t.keySet().removeIf(p -> !p.startsWith("layers.2.") && !p.equals("logits"));
            if (s == gapAt) t.remove("layers.2.mlp.out");
        });
        SyntheticDump.selectPoints(cand, "layers.2.*", "logits");
        return cand;
    }

    @Test
    void pointsTheCandidateLeftOutByAnExplicitSelectionAreExcludedAndStated() throws IOException {
        Path cand = layer2AndLogits("subset", -1);
        var r = Comparison.compareDumps(ref, cand, Comparison.Options.defaults());
        assertThat(r.verdict()).isEqualTo("match");
        assertThat(r.completeness().excluded()).contains("embed", "layers.0.attn.q", "final_norm").doesNotContain("logits");
        assertThat(r.notes()).anyMatch(n -> n.contains("excluded by choice") && n.contains("--points layers.2.*,logits"));
    }

    @Test
    void aSelectionDoesNotExcuseAPointItSelects() throws IOException {
        Path cand = layer2AndLogits("subset-gap", 3);
        var r = Comparison.compareDumps(ref, cand, Comparison.Options.defaults());
        assertThat(r.verdict()).isEqualTo("incomplete");
        assertThat(r.completeness().pointsOnlyInReference()).containsExactly("layers.2.mlp.out");
    }

    @Test
    void anotherCheckpointIsBadInputUnlessAllowed() {
        Path cand = SyntheticDump.write(tmp.resolve("other"), SyntheticDump.NONE, "c".repeat(64), SyntheticDump.tokens());
        assertThatThrownBy(() -> Comparison.compareDumps(ref, cand, Comparison.Options.defaults()))
                .isInstanceOf(BadInputException.class)
                .hasMessageContaining(cand.resolve("manifest.json").toString())
                .hasMessageContaining("another checkpoint")
                .hasMessageContaining("--allow-mismatch");
        var r = Comparison.compareDumps(ref, cand, new Comparison.Options(ToleranceProfile.defaults(), true, null));
        assertThat(r.notes()).anyMatch(n -> n.contains("another checkpoint"));
        assertThat(r.matches()).isTrue();
    }

    @Test
    void otherTokensAreBadInput() {
        var tokens = new ArrayList<>(SyntheticDump.tokens());
        tokens.set(6, 49);
        Path cand = SyntheticDump.write(tmp.resolve("tok"), SyntheticDump.NONE, SyntheticDump.CONFIG_SHA, tokens);
        assertThatThrownBy(() -> Comparison.compareDumps(ref, cand, Comparison.Options.defaults()))
                .isInstanceOf(BadInputException.class).hasMessageContaining("position 6 is 49");
    }

    @Test
    void aShorterCandidateIsComparedAsFarAsItGoes() {
        Path cand = SyntheticDump.write(tmp.resolve("short"), SyntheticDump.NONE, SyntheticDump.CONFIG_SHA, SyntheticDump.tokens(), 2);
        var r = Comparison.compareDumps(ref, cand, Comparison.Options.defaults());
        assertThat(r.stepsCompared()).isEqualTo(2);
        assertThat(r.verdict()).isEqualTo("incomplete");
        assertThat(r.completeness().reasons()).anyMatch(n -> n.contains("2 of the reference's 4 steps"));
    }

    @Test
    void noCommonPointIsBadInput() throws IOException {
        Path cand = SyntheticDump.write(tmp.resolve("none"), (s, t) -> {
            var keep = t.get("logits");
            t.clear();
            t.put("something.else", new CapturedTensor("something.else", keep.shape(), keep.data()));
        });
        assertThatThrownBy(() -> Comparison.compareDumps(ref, cand, Comparison.Options.defaults()))
                .isInstanceOf(BadInputException.class).hasMessageContaining("shares no capture point");
        assertThat(Files.exists(cand)).isTrue();
    }
}
