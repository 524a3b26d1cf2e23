package dev.decodiff.harness.arch.gemma4;

import dev.decodiff.harness.live.TinyCase;
import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.Fault;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.harness.compare.CandidateSource;
import dev.decodiff.harness.compare.Comparison;
import dev.decodiff.harness.compare.ComparisonResult;
import dev.decodiff.harness.compare.StreamingCandidate;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.dump.StepTensors;
import dev.decodiff.metal.TensorView;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Set;
import java.util.function.Consumer;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A live comparison streams: each tensor is compared as the engine produces it. It must find exactly what the
 * comparison of whole steps finds — every cell's sums to the bit, the same first divergence and diagnosis.
 */
class StreamingCompareTest {
    @TempDir
    static Path home;
    static Path model, dump;

    @BeforeAll
    static void setUp() {
        var c = TinyCase.write(home, home.resolve("case"), 6);
        model = c.model();
        dump = c.dump();
    }

    /** The same live engine, handing over whole steps only (the path a dump takes). */
    record WholeSteps(LiveCandidate live) implements CandidateSource {
        @Override public String describe() { return live.describe(); }
        @Override public int stepCount() { return live.stepCount(); }
        @Override public StepTensors step(int s) { return live.step(s); }
        @Override public String observerEffect() { return live.observerEffect(); }
    }

    @Test
    void streamedAndWholeStepComparisonsAgreeBitForBit() {
        for (var options : new EngineOptions[]{EngineOptions.defaults(), EngineOptions.defaults().withFaults(Set.of(Fault.K_EQ_V_ROTATED_KEYS)),
                EngineOptions.defaults().withFaults(Set.of(Fault.SLIDING_WINDOW_OFF_BY_ONE))}) {
            try (var m = Gemma4Model.load(model)) {
                var ref = DumpReader.open(dump);
                ComparisonResult streamed, whole;
                try (var live = LiveCandidate.forPoints(m, options, ref.manifest(), ref.allPoints(), true)) {
                    streamed = Comparison.run(ref, live, Comparison.Options.defaults());
                }
                try (var live = LiveCandidate.forPoints(m, options, ref.manifest(), ref.allPoints(), true)) {
                    whole = Comparison.run(ref, new WholeSteps(live), Comparison.Options.defaults());
                }
                assertThat(streamed.cells()).hasSameSizeAs(whole.cells()).isNotEmpty();
                for (int i = 0; i < whole.cells().size(); i++) {
                    var a = streamed.cells().get(i);
                    var b = whole.cells().get(i);
                    assertThat(a.point()).isEqualTo(b.point());
                    assertThat(a.step()).isEqualTo(b.step());
                    assertThat(Double.doubleToRawLongBits(a.relL2())).as("%s at step %d", a.point(), a.step()).isEqualTo(Double.doubleToRawLongBits(b.relL2()));
                    assertThat(Double.doubleToRawLongBits(a.cosine())).isEqualTo(Double.doubleToRawLongBits(b.cosine()));
                    assertThat(Double.doubleToRawLongBits(a.maxAbsDiff())).isEqualTo(Double.doubleToRawLongBits(b.maxAbsDiff()));
                    assertThat(a.maxIndex()).isEqualTo(b.maxIndex());
                    assertThat(a.shapeNote()).isEqualTo(b.shapeNote());
                }
                assertThat(streamed.tokens()).isEqualTo(whole.tokens());
                assertThat(streamed.onlyInReference()).isEqualTo(whole.onlyInReference());
                assertThat(streamed.verdict()).isEqualTo(whole.verdict());
                assertThat(streamed.observerEffect()).isEqualTo(whole.observerEffect());
                var fs = streamed.firstDivergence();
                var fw = whole.firstDivergence();
                if (options.faults().isEmpty()) {
                    assertThat(fs).isNull();
                    assertThat(fw).isNull();
                } else {
                    assertThat(fs).as("%s", options.faults()).isNotNull();
                    assertThat(fs.step()).isEqualTo(fw.step());
                    assertThat(fs.point()).isEqualTo(fw.point());
                    assertThat(fs.diagnosis()).isNotNull().isEqualTo(fw.diagnosis());
                    assertThat(fs.upstream().stream().map(c -> c.point() + " " + c.relL2()).toList())
                            .isEqualTo(fw.upstream().stream().map(c -> c.point() + " " + c.relL2()).toList());
                }
            }
        }
    }

    /** The live engine, noting how much of the reference's step file is resident in this process as each step ends. */
    static final class ResidentAtStepEnd implements StreamingCandidate {
        private final LiveCandidate live;
        private final Path stepFile;
        private final int step;
        long resident = -1;

        ResidentAtStepEnd(LiveCandidate live, Path stepFile, int step) {
            this.live = live;
            this.stepFile = stepFile;
            this.step = step;
        }

        @Override public String describe() { return live.describe(); }
        @Override public int stepCount() { return live.stepCount(); }
        @Override public StepTensors step(int s) { return live.step(s); }
        @Override public void close() { live.close(); }

        @Override
        public StepEnd stream(int s, Consumer<TensorView> sink) {
            var end = live.stream(s, sink);
            if (s == step) resident = residentBytes(stepFile);
            return end;
        }
    }

    /** The resident pages of this process's mappings of {@code file}, from the kernel's own account (/proc/self/smaps). */
    static long residentBytes(Path file) {
        try {
            String name = file.toRealPath().toString();
            long kb = 0;
            boolean inFile = false;
            for (String line : Files.readAllLines(Path.of("/proc/self/smaps"))) {
                if (line.matches("^[0-9a-f]+-[0-9a-f]+ .*")) inFile = line.endsWith(" " + name);
                else if (inFile && line.startsWith("Rss:")) kb += Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
            return kb * 1024;
        } catch (IOException e) {
            throw new AssertionError(e);
        }
    }

    @Test
    void aLiveCompareLetsGoOfEachReferenceTensorsPagesOnceCompared() throws IOException {
        org.junit.jupiter.api.Assumptions.assumeTrue(Files.isReadable(Path.of("/proc/self/smaps")), "needs Linux's /proc/self/smaps");
        // Tensors of megabytes (a 2,048-token prompt, hidden 256), as on real shapes: the kernel maps up to 64 KB
        // around each page fault (fault-around), which would blur tensors of a few pages, like the tiny case's.
        Path wide = dev.decodiff.harness.bench.BenchCheckpoint.ensure(
                dev.decodiff.harness.bench.BenchSpec.parse("small,hidden=256,ffn=512,vocab=4096,head_dim=32,global_head_dim=64,layers=2"),
                home.resolve("bench"), msg -> {});
        var prompt = new StringBuilder("2");
        for (int i = 1; i < 2048; i++) prompt.append(',').append(4 + (i * 37) % 4000);
        Path longDump = home.resolve("long-prompt");
        var d = dev.decodiff.harness.cli.CliTest.run("dump", "--model", wide.toString(), "--tokens", prompt.toString(), "-n", "2", "--out", longDump.toString());
        assertThat(d.code()).as(d.err()).isZero();
        try (var m = Gemma4Model.load(wide)) {
            var ref = DumpReader.open(longDump);
            Path step0 = ref.stepFile(0);
            long size = Files.size(step0);
            assertThat(size).as("a step file of many pages").isGreaterThan(16L << 20);
            try (var live = new ResidentAtStepEnd(LiveCandidate.forPoints(m, EngineOptions.defaults(), ref.manifest(), ref.allPoints(), false), step0, 0)) {
                var r = Comparison.run(ref, live, Comparison.Options.defaults());
                assertThat(r.exitCode()).as("the engine against its own dump").isZero();
                // every tensor of the step was read by then; kept, they would all be resident (the whole file)
                assertThat(live.resident).as("bytes of %s (%d bytes) resident as step 0 ends", step0, size).isBetween(0L, size / 10);
            }
        }
    }
}
