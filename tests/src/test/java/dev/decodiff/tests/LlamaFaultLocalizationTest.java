package dev.decodiff.tests;

import dev.decodiff.engine.arch.Architectures;
import dev.decodiff.engine.llama.LlamaArchitecture;
import dev.decodiff.engine.llama.LlamaConfig;
import dev.decodiff.engine.llama.LlamaFault;
import dev.decodiff.harness.compare.Comparison;
import dev.decodiff.harness.compare.ComparisonResult;
import dev.decodiff.harness.compare.ToleranceProfile;
import dev.decodiff.harness.dump.DumpManifest;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.live.ArchitectureCandidate;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Every Llama-family catalog fault, run live against transformers' own references of llama-tiny and qwen3-tiny, must
 * be named at its cell: the first divergent (step, point) in causal order is the one the fault's rule gives on the
 * checkpoint's config and the case's steps. A fault the checkpoint cannot show (qwen3's q/k-norm bugs on llama, an
 * untied head on a tied one) must leave every cell matching.
 */
class LlamaFaultLocalizationTest {

    static List<Path> cases() { return ReferenceCases.llamaCases(); }

    static Stream<Arguments> faultsAndCases() {
        var out = new ArrayList<Arguments>();
        for (var f : LlamaFault.values())
            for (Path c : ReferenceCases.llamaCases()) out.add(Arguments.of(f, c));
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

    /** The fault's rule resolved on this case: from the config and the manifest's steps, never from a run. */
    /** The fault's cell on a case, from its rule, the checkpoint's config and the case's manifest only. */
    static LlamaFault.Cell expected(LlamaFault fault, Path caseDir) {
        var cfg = LlamaConfig.read(ReferenceCases.checkpointOf(caseDir).resolve("config.json"));
        DumpManifest m = DumpReader.open(caseDir).manifest();
        return fault.expected().cellIn(cfg, m.stepStarts(), m.stepLengths());
    }

    @Test
    void theCasesCoverBothModelTypesAndEveryRule() {
        var types = ReferenceCases.llamaCases().stream()
                .map(c -> LlamaConfig.read(ReferenceCases.checkpointOf(c).resolve("config.json")).modelType()).distinct().toList();
        assertThat(types).contains(LlamaConfig.LLAMA, LlamaConfig.QWEN3);
        // every fault shows on at least one bundled case, so none is checked only as "nothing changes"
        for (var f : LlamaFault.values())
            assertThat(ReferenceCases.llamaCases().stream().anyMatch(c -> expected(f, c) != null)).as("%s shows somewhere", f).isTrue();
        assertThat(LlamaFault.values()).hasSizeGreaterThanOrEqualTo(8);
        assertThat(LlamaArchitecture.INSTANCE.faultNames()).containsExactlyElementsOf(Arrays.stream(LlamaFault.values()).map(LlamaFault::id).toList());
    }

    @ParameterizedTest(name = "{0} on {1}")
    @MethodSource("faultsAndCases")
    void eachFaultIsNamedAtItsCell(LlamaFault fault, Path caseDir) {
        var cell = expected(fault, caseDir);
        var result = compare(caseDir, List.of(fault.id()));
        if (cell == null) {
            assertThat(result.verdict()).as("%s on %s, which cannot show it", fault, caseDir).isEqualTo("match");
            return;
        }
        var first = result.firstDivergence();
        assertThat(first).as("%s on %s: a divergence is found", fault, caseDir).isNotNull();
        assertThat(first.step() + " " + first.point()).as("%s on %s (expected %s)", fault, caseDir, fault.expected())
                .isEqualTo(cell.step() + " " + cell.point());
        // the reference agrees up to that cell: no earlier step has a cell over tolerance
        assertThat(result.cells().stream().filter(c -> c.failed() && c.step() < first.step())).isEmpty();
    }

    /**
     * Faults whose substitution cannot heal a layer: rmsnorm-one-plus-weight acts on every norm (the input norm has no
     * capture point, and the post-attention norm is wrong again after q/k/v are written back); lm-head-tied's cell is
     * the logits, the last point, with nothing after it to heal.
     */
    static final java.util.Set<LlamaFault> NOT_PROVABLE = java.util.EnumSet.of(LlamaFault.RMSNORM_ONE_PLUS_WEIGHT, LlamaFault.LM_HEAD_TIED);

    /** bisect names every fault the short case can show as itself by replaying the catalog, and proves it by substitution. */
    static Stream<Arguments> shownOnShortCases() {
        return faultsAndCases().filter(a -> {
            var c = (Path) a.get()[1];
            return c.getFileName().toString().equals("short") && expected((LlamaFault) a.get()[0], c) != null;
        });
    }

    @ParameterizedTest(name = "{0} on {1}")
    @MethodSource("shownOnShortCases")
    void bisectNamesEachFaultAsItself(LlamaFault fault, Path caseDir) throws Exception {
        System.setProperty("decodiff.home", ReferenceCases.repoRoot().toString());
        var r = Cli.run("bisect", caseDir.toString(), "--fault", fault.id(), "--json");
        assertThat(r.code()).as(r.toString()).isEqualTo(1);
        var naming = r.json().get("catalog_naming");
        assertThat(naming.get("named").asText()).as("%s on %s", fault, caseDir).isEqualTo(fault.id());
        if (!NOT_PROVABLE.contains(fault)) assertThat(naming.get("proved").asBoolean()).as("%s proved", fault).isTrue();
    }

    /**
     * Without a reference: selfcheck's paths (one-token steps, chunked and one-pass prefill) disagree exactly for the
     * faults that only one-token decode steps run, and agree for those every path shares.
     */
    @ParameterizedTest(name = "{0}")
    @org.junit.jupiter.params.provider.EnumSource(LlamaFault.class)
    void selfcheckCatchesTheDecodeOnlyFaults(LlamaFault fault) throws Exception {
        String checkpoint = fault.expected().requires() == LlamaFault.Requires.QK_NORM ? "qwen3-tiny" : "llama-tiny";
        System.setProperty("decodiff.home", ReferenceCases.repoRoot().toString());
        var r = Cli.run("selfcheck", "--model", ReferenceCases.repoRoot().resolve("checkpoints/" + checkpoint).toString(), "--fault", fault.id(), "--json");
        boolean decodeOnly = fault.expected().when() == LlamaFault.When.FIRST_DECODE;
        assertThat(r.code()).as(r.toString()).isEqualTo(decodeOnly ? 1 : 0);
        var failed = new java.util.ArrayList<String>();
        r.json().get("checks").forEach(c -> { if (!c.get("passed").asBoolean()) failed.add(c.get("check").asText()); });
        if (decodeOnly) assertThat(failed).contains("decode-vs-prefill");
        else assertThat(failed).isEmpty();
    }

    /** The same harness path with no fault switched on raises no alarm on any case. */
    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    void noFaultNoAlarm(Path caseDir) {
        var result = compare(caseDir, List.of());
        assertThat(result.verdict()).isEqualTo("match");
        assertThat(result.firstDivergence()).isNull();
        assertThat(result.cells()).isNotEmpty().noneMatch(c -> c.failed());
    }

    /** An id outside the catalog is refused with the catalog named, not run as fault-free. */
    @Test
    void anUnknownFaultIsRefused() {
        try (var model = Architectures.load(ReferenceCases.repoRoot().resolve("checkpoints/llama-tiny"))) {
            org.assertj.core.api.Assertions.assertThatThrownBy(() -> model.newSession(null, List.of("gqa-modulo")))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("kv-heads-tiled");
        }
    }
}
