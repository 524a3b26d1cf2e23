package dev.decodiff.harness.cli;

import dev.decodiff.harness.SyntheticDump;
import dev.decodiff.harness.dump.CapturedTensor;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Two dumps broken the same way (two runs of one buggy producer) agree with each other, so a comparison that only
 * checks each side against the other would pass them. compare applies the format's own rules to each side: every
 * pair here is refused with exit 2 naming the file, and {@code validate} rejects each dump for the same reason.
 */
class BrokenAlikeTest {
    @TempDir
    Path tmp;

    private Path dump(String name, SyntheticDump.Mutation m) { return SyntheticDump.write(tmp.resolve(name), m); }

    private static CliTest.Run refusedAlike(Path ref, Path cand, String... fragments) {
        var r = CliTest.run("compare", ref.toString(), cand.toString());
        assertThat(r.code()).as(r.out() + r.err()).isEqualTo(Main.BAD_INPUT);
        assertThat(r.out()).doesNotContain("MATCH");
        assertThat(r.err().strip().lines()).hasSize(1);
        assertThat(r.err()).doesNotContain("internal error").contains(ref.toString());
        for (String f : fragments) assertThat(r.err()).contains(f);
        var v = CliTest.run("validate", cand.toString());
        assertThat(v.code()).as(v.out()).isEqualTo(Main.BAD_INPUT);
        for (String f : fragments) assertThat(v.out()).contains(f);
        return r;
    }

    /** Every tensor but the logits replaced by one of the same rank with a zero-length last axis. */
    private static final SyntheticDump.Mutation EMPTY = (s, t) -> t.replaceAll((name, ct) -> {
        if (name.equals("logits")) return ct;
        long[] shape = ct.shape().clone();
        shape[shape.length - 1] = 0;
        return new CapturedTensor(name, shape, new float[0]);
    });

    @Test
    void twoDumpsOfEmptyTensorsAreRefusedNotAMatchOfNothing() {
        refusedAlike(dump("ref", EMPTY), dump("cand", EMPTY), "tensor 'embed' has shape [5, 0]", "holds no values");
    }

    @Test
    void anEmptyPointOutsideTheContractIsRefusedToo() {
        SyntheticDump.Mutation extra = (s, t) -> t.put("my.scratch", new CapturedTensor("my.scratch", new long[]{0}, new float[0]));
        refusedAlike(dump("ref", extra), dump("cand", extra), "tensor 'my.scratch' has shape [0]", "holds no values");
    }

    /** At step 1 (one token fed) every row point holds two rows, on both sides alike. */
    private static final SyntheticDump.Mutation TWO_ROWS = (s, t) -> {
        if (s != 1) return;
        t.replaceAll((name, ct) -> {
            if (name.endsWith("_read") || name.equals("logits")) return ct;
            long[] shape = ct.shape().clone();
            shape[0] = 2;
            float[] data = Arrays.copyOf(ct.data(), ct.data().length * 2);
            System.arraycopy(ct.data(), 0, data, ct.data().length, ct.data().length);
            return new CapturedTensor(name, shape, data);
        });
    };

    @Test
    void twoDumpsWhoseFirstAxisIsNotTheStepsTokenCountAreRefused() {
        refusedAlike(dump("ref", TWO_ROWS), dump("cand", TWO_ROWS), "step-0001.safetensors: tensor 'embed' has shape [2, 16]",
                "expected [T, hidden] with T = 1");
    }

    @Test
    void twoDumpsReadingMorePositionsThanThereAreAreRefused() {
        SyntheticDump.Mutation m = (s, t) -> {
            if (s != 2) return;
            String k = "layers.1.attn.k_read";
            int c = 99;
            t.put(k, new CapturedTensor(k, new long[]{c, SyntheticDump.NKV, SyntheticDump.D}, new float[c * SyntheticDump.NKV * SyntheticDump.D]));
        };
        refusedAlike(dump("ref", m), dump("cand", m), "'layers.1.attn.k_read' has shape [99, 2, 8]", "1 ≤ C ≤ 7");
    }

    @Test
    void twoDumpsWhoseWidthChangesMidwayAreRefused() {
        SyntheticDump.Mutation m = (s, t) -> {
            if (s != 3) return;
            t.put("layers.0.attn.q", new CapturedTensor("layers.0.attn.q", new long[]{1, SyntheticDump.NH, 4}, new float[SyntheticDump.NH * 4]));
        };
        refusedAlike(dump("ref", m), dump("cand", m), "'layers.0.attn.q' has shape [1, 4, 4] but its trailing axes were [4, 8] at step 0");
    }

    @Test
    void twoDumpsHoldingPointsTheirSelectionLeavesOutAreRefused() {
        Path r = dump("ref", SyntheticDump.NONE), c = dump("cand", SyntheticDump.NONE);
        SyntheticDump.selectPoints(r, "layers.*");
        SyntheticDump.selectPoints(c, "layers.*");
        refusedAlike(r, c, "selected_points layers.* does not select embed");
    }

    @Test
    void aPointMissingFromOneStepOfBothSidesIsIncompleteNotAMatch() {
        SyntheticDump.Mutation m = (s, t) -> { if (s == 2) t.remove("layers.1.mlp.out"); };
        Path r = dump("ref", m), c = dump("cand", m);
        var run = CliTest.run("compare", r.toString(), c.toString());
        assertThat(run.code()).as(run.out() + run.err()).isEqualTo(Main.INCOMPLETE);
        assertThat(run.out()).contains("missing: reference: " + r + ": step-0002.safetensors: lacks 1 point(s)")
                .contains("missing: candidate: " + c + ": step-0002.safetensors: lacks 1 point(s)").contains("hold: layers.1.mlp.out");
        assertThat(CliTest.run("validate", r.toString()).code()).isEqualTo(Main.BAD_INPUT);
    }

    @Test
    void aStepFileThatIsADirectoryIsDamagedNotMissing() throws IOException {
        Path r = dump("ref", SyntheticDump.NONE), c = dump("cand", SyntheticDump.NONE), f = c.resolve("step-0002.safetensors");
        Files.delete(f);
        Files.createDirectory(f);
        var run = CliTest.run("compare", r.toString(), c.toString());
        assertThat(run.code()).as(run.out() + run.err()).isEqualTo(Main.BAD_INPUT);
        assertThat(run.err()).contains(f + ": is not a regular file but a directory").doesNotContain("missing").doesNotContain("incomplete");
        assertThat(CliTest.run("validate", c.toString()).out()).contains(f + ": is not a regular file but a directory");
    }

    @Test
    void aStepFileThatIsAFifoIsDamagedNotMissingAndNothingHangs() throws Exception {
        Path r = dump("ref", SyntheticDump.NONE), c = dump("cand", SyntheticDump.NONE), f = c.resolve("step-0001.safetensors");
        Files.delete(f);
        assertThat(new ProcessBuilder("mkfifo", f.toString()).start().waitFor()).isZero();
        var run = CliTest.run("compare", r.toString(), c.toString());
        assertThat(run.code()).as(run.out() + run.err()).isEqualTo(Main.BAD_INPUT);
        assertThat(run.err()).contains(f + ": is not a regular file but a special file (a FIFO").doesNotContain("missing").doesNotContain("incomplete");
    }

    @Test
    void aManifestThatIsADirectoryIsSaidToBeOne() throws IOException {
        Path r = dump("ref", SyntheticDump.NONE), c = dump("cand", SyntheticDump.NONE), mf = c.resolve("manifest.json");
        Files.delete(mf);
        Files.createDirectory(mf);
        var run = CliTest.run("compare", r.toString(), c.toString());
        assertThat(run.code()).as(run.out() + run.err()).isEqualTo(Main.BAD_INPUT);
        assertThat(run.err()).contains(mf + ": is not a regular file but a directory").doesNotContain("missing");
        var v = CliTest.run("validate", c.toString());
        assertThat(v.code()).isEqualTo(Main.BAD_INPUT);
        assertThat(v.out()).contains(mf + ": is not a regular file but a directory");
    }

    @Test
    void anAllZeroReferenceTensorIsRefusedAsReference() {
        SyntheticDump.Mutation zero = (s, t) -> { if (s == 1) Arrays.fill(t.get("layers.2.attn.out").data(), 0f); };
        Path r = dump("ref", zero), c = dump("cand", SyntheticDump.NONE);
        var run = CliTest.run("compare", r.toString(), c.toString());
        assertThat(run.code()).as(run.out() + run.err()).isEqualTo(Main.BAD_INPUT);
        assertThat(run.err()).contains(r.resolve("step-0001.safetensors") + ": reference tensor 'layers.2.attn.out' is all zeros");
        assertThat(run.out()).doesNotContain("MATCH");
    }

    @Test
    void anAllZeroCandidateTensorIsADivergenceThatSaysSo() {
        SyntheticDump.Mutation zero = (s, t) -> { if (s == 1) Arrays.fill(t.get("layers.2.attn.out").data(), 0f); };
        Path r = dump("ref", SyntheticDump.NONE), c = dump("cand", zero);
        var run = CliTest.run("compare", r.toString(), c.toString());
        assertThat(run.code()).as(run.out() + run.err()).isEqualTo(Main.DIVERGENCE);
        assertThat(run.out()).contains("the candidate's layers.2.attn.out is all zeros");
    }

    /** layers.0's k_read and v_read hold the last {@code window.apply(step, positions)} positions at each step. */
    private static SyntheticDump.Mutation reads(java.util.function.IntBinaryOperator window) {
        return (s, t) -> {
            for (String k : new String[]{"layers.0.attn.k_read", "layers.0.attn.v_read"}) {
                var ct = t.get(k);
                int positions = (int) ct.shape()[0], c = window.applyAsInt(s, positions), row = SyntheticDump.NKV * SyntheticDump.D;
                float[] last = java.util.Arrays.copyOfRange(ct.data(), (positions - c) * row, positions * row);
                t.put(k, new CapturedTensor(k, new long[]{c, SyntheticDump.NKV, SyntheticDump.D}, last));
            }
        };
    }

    @Test
    void aSlidingWindowOfOneSizeAtEveryStepIsValid() {
        Path d = dump("window", reads((s, positions) -> Math.min(4, positions)));
        var v = CliTest.run("validate", d.toString());
        assertThat(v.code()).as(v.out()).isZero();
        var r = CliTest.run("compare", d.toString(), dump("window-too", reads((s, positions) -> Math.min(4, positions))).toString());
        assertThat(r.code()).as(r.out() + r.err()).isZero();
    }

    @Test
    void twoDumpsWhoseReadWindowChangesFromStepToStepAreRefused() {
        // 4 positions at step 1, then every position again: no one window W gives min(W, p+1) at both
        var m = reads((s, positions) -> s == 1 ? 4 : positions);
        refusedAlike(dump("ref", m), dump("cand", m), "step-0000.safetensors: tensor 'layers.0.attn.k_read' reads 5 positions, but its read window is 4",
                "min(4, 5) = 4");
        var v = CliTest.run("validate", dump("again", m).toString());
        assertThat(v.out()).contains("step-0002.safetensors: tensor 'layers.0.attn.k_read' reads 7 positions").contains("min(4, 7) = 4");
    }

    @Test
    void aCandidateWhoseReadWindowChangesIsADivergenceNotBadInput() {
        Path r = dump("ref", SyntheticDump.NONE), c = dump("cand", reads((s, positions) -> s == 1 ? 4 : positions));
        var run = CliTest.run("compare", r.toString(), c.toString());
        assertThat(run.code()).as(run.out() + run.err()).isEqualTo(Main.DIVERGENCE);
        assertThat(run.out()).contains("layers.0.attn.k_read");
    }
}
