package dev.decodiff.tests;

import dev.decodiff.engine.arch.Architectures;
import dev.decodiff.engine.qwen35.Qwen35Config;
import dev.decodiff.engine.qwen35.Qwen35Fault;
import dev.decodiff.harness.compare.Comparison;
import dev.decodiff.harness.compare.ComparisonResult;
import dev.decodiff.harness.compare.ToleranceProfile;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.live.ArchitectureCandidate;
import dev.decodiff.harness.selftest.ExpectedCell;
import dev.decodiff.harness.arch.qwen35.Qwen35Expectations;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Every Qwen3.5 catalog fault, run live against transformers' own references of the tiny checkpoints, must be named
 * at its cell: the first divergent (step, point) in causal order is the fault's own. A state hand-over bug is named at
 * the state read at the step it first reads a wrong state, not at the layer output computed from it.
 */
class Qwen35FaultLocalizationTest {
    private static final Path DUMPS = ReferenceCases.repoRoot().resolve("reference-dumps");
    /** The faults that break the hand-over from one step to the next: checked on every reference, not only long. */
    private static final List<Qwen35Fault> HAND_OVER = List.of(Qwen35Fault.CONV_STATE_NOT_CARRIED, Qwen35Fault.STATE_NOT_CARRIED,
            Qwen35Fault.STATE_STALE, Qwen35Fault.DECODE_DECAY_AFTER_UPDATE, Qwen35Fault.CONV_STATE_DROPPED_ON_CONTINUATION,
            Qwen35Fault.STATE_KEPT_IN_BF16);

    /** (fault, reference case) pairs: every fault on both checkpoints' long case, the hand-over faults on every case. */
    static Stream<Arguments> faultsAndCases() {
        var out = new ArrayList<Arguments>();
        for (var f : Qwen35Fault.values())
            for (String ck : List.of("qwen35-tiny", "qwen35-tiny-moe"))
                for (String c : HAND_OVER.contains(f) ? List.of("long", "short", "continuation") : List.of("long")) {
                    Path dir = DUMPS.resolve(ck).resolve(c);
                    if (dir.toFile().isDirectory()) out.add(Arguments.of(f, dir));
                }
        return out.stream();
    }

    private static ComparisonResult compare(Path caseDir, List<String> faults) {
        var ref = DumpReader.open(caseDir);
        try (var model = Architectures.load(ReferenceCases.checkpointOf(caseDir))) {
            var points = ref.allPoints();
            return Comparison.run(ref, new ArchitectureCandidate(model, faults, ref.manifest(), points::contains, false),
                    new Comparison.Options(ToleranceProfile.defaults(), false, s -> {}));
        }
    }

    @ParameterizedTest(name = "{0} on {1}")
    @MethodSource("faultsAndCases")
    void eachFaultIsNamedAtItsCell(Qwen35Fault fault, Path caseDir) {
        var cfg = Qwen35Config.read(ReferenceCases.checkpointOf(caseDir).resolve("config.json"));
        // the catalog's rule, resolved as decodiff selftest resolves it
        var expected = Qwen35Expectations.of(fault, cfg, DumpReader.open(caseDir).manifest());
        var result = compare(caseDir, List.of(fault.id()));
        if (!(expected instanceof ExpectedCell.Cell cell)) {
            // the checkpoint has no layer the fault lives in (a dense model's MoE fault), the case has no step it acts
            // on, or the fault needs a restore that a reference case never does: nothing may change
            assertThat(result.verdict()).as("%s on %s, which cannot show it", fault, caseDir).isEqualTo("match");
            return;
        }
        var first = result.firstDivergence();
        assertThat(first).as("%s on %s: a divergence is found", fault, caseDir).isNotNull();
        assertThat(first.step() + " " + first.point()).as("%s on %s (expected %s)", fault, caseDir, fault.expected())
                .isEqualTo(cell.step() + " " + cell.point());
        // the reference agrees up to that cell: nothing earlier in causal order is over tolerance
        assertThat(result.cells().stream().filter(c -> c.failed() && c.step() < first.step())).isEmpty();
    }

    /** dump --fault records the fault in the manifest, and the dump is named at the fault's cell as a candidate. */
    @Test
    void aFaultedDumpRecordsItsFaultAndIsNamedAtItsCell(@org.junit.jupiter.api.io.TempDir Path tmp) throws Exception {
        Path ref = DUMPS.resolve("qwen35-tiny/short"), out = tmp.resolve("faulted");
        var d = Cli.run("dump", "--model", ReferenceCases.checkpointOf(ref).toString(), "--reference", ref.toString(),
                "--fault", "state-stale", "--out", out.toString());
        assertThat(d.code()).as(d.toString()).isZero();
        var c = Cli.run("compare", ref.toString(), out.toString(), "--json");
        assertThat(c.code()).as(c.toString()).isEqualTo(1);
        var json = c.json();
        assertThat(json.at("/first_divergence/step").asInt()).isEqualTo(2);
        assertThat(json.at("/first_divergence/point").asText()).isEqualTo("layers.0.linear.state_read");
        assertThat(new com.fasterxml.jackson.databind.ObjectMapper().readTree(out.resolve("manifest.json").toFile())
                .at("/producer/faults").toString()).isEqualTo("[\"state-stale\"]");
    }

    /** The hand-over bugs are decode bugs: the prefill step itself matches the reference in every cell. */
    @Test
    void handOverFaultsLeaveThePrefillExact() {
        Path caseDir = DUMPS.resolve("qwen35-tiny/long");
        for (var f : HAND_OVER) {
            // state-kept-in-bf16 rounds the state prefill writes, and a continuation needs a multi-token warm step
            if (f == Qwen35Fault.STATE_KEPT_IN_BF16 || f == Qwen35Fault.CONV_STATE_DROPPED_ON_CONTINUATION) continue;
            var result = compare(caseDir, List.of(f.id()));
            assertThat(result.cellsOfStep(0)).as("%s, step 0", f).isNotEmpty().noneMatch(c -> c.failed());
            assertThat(result.firstDivergence().point()).as("%s", f).contains(".linear.");
        }
    }
}
