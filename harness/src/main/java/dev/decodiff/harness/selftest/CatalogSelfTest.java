package dev.decodiff.harness.selftest;

import dev.decodiff.engine.arch.Architectures;
import dev.decodiff.engine.arch.LoadedModel;
import dev.decodiff.harness.arch.ArchitectureSupports;
import dev.decodiff.harness.arch.CatalogExpectations;
import dev.decodiff.harness.bisect.CatalogBisector;
import dev.decodiff.harness.bisect.CatalogReplays;
import dev.decodiff.harness.compare.ToleranceProfile;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.selfcheck.RecurrentSelfCheck;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;
import java.util.function.Function;

/**
 * The self-test of a catalog run through the plug-in seam (Qwen3.5's, the Llama family's) on one bundled checkpoint:
 * per case the clean engine must match the transformers reference, and every fault planted in the engine must be
 * localized by compare at the cell its family's {@link CatalogExpectations} resolves from the catalog's rule, and named
 * by bisect (the fault itself, by replay) — or, where the case cannot show it, leave compare at match; a fault that
 * needs a restore is found by selfcheck's prefix-reuse at its cell. Bisect's proof by substitution is reported, not
 * required: some faults have no recorded point to write back (a norm whose output is not captured, the logits with
 * nothing after them), and naming by replay already ties the cell to the fault.
 */
public final class CatalogSelfTest {
    private final ToleranceProfile profile;
    private final Function<LoadedModel, CatalogExpectations> expectationsOf;

    /** Each fault judged by its family's own rules. */
    public CatalogSelfTest(ToleranceProfile profile) {
        this(profile, m -> ArchitectureSupports.of(m.architecture()).catalogExpectations().orElseThrow());
    }

    /**
     * Each fault judged by {@code expectations} instead: how a test shows that a rule the engine does not follow is
     * reported as a miss, not passed over.
     */
    public CatalogSelfTest(ToleranceProfile profile, CatalogExpectations expectations) { this(profile, m -> expectations); }

    private CatalogSelfTest(ToleranceProfile profile, Function<LoadedModel, CatalogExpectations> expectationsOf) {
        this.profile = profile;
        this.expectationsOf = expectationsOf;
    }

    /** Every case of one checkpoint: the clean engine, then each catalog fault alone, in the catalog's order. */
    public List<SelfTestResult.CatalogOutcome> checkpoint(String ckpt, List<SelfTest.Case> cases, Consumer<String> progress) {
        var out = new ArrayList<SelfTestResult.CatalogOutcome>();
        try (var model = Architectures.load(cases.get(0).model())) {
            String arch = model.architecture().name();
            var expectations = expectationsOf.apply(model);
            for (var c : cases) {
                progress.accept(ckpt + "/" + c.name());
                var ref = DumpReader.open(c.dir());
                // one set of replays per case: bisect of every fault asks its cell of the same runs
                var bisector = new CatalogBisector(model, ref, profile, new CatalogReplays(model, ref.manifest(), true));
                out.add(clean(arch, bisector, c));
                for (String f : model.architecture().faultNames()) out.add(faulty(arch, model, expectations, bisector, ref, c, f));
            }
        }
        return out;
    }

    private SelfTestResult.CatalogOutcome clean(String arch, CatalogBisector bisector, SelfTest.Case c) {
        long t0 = System.nanoTime();
        var b = bisector.runLive(List.of());
        var fd = b.firstDivergence();
        String got = fd == null ? "match" : "step " + fd.step() + ", " + fd.point();
        String named = b.catalog() == null ? null : b.catalog().named();
        boolean ok = fd == null && named == null;
        return new SelfTestResult.CatalogOutcome(arch, null, c.checkpoint(), c.name(), new ExpectedCell.NotApplicable("clean"), got, named, null,
                ok, ok, ok ? "no alarm" : "false alarm: " + got, secs(t0));
    }

    private SelfTestResult.CatalogOutcome faulty(String arch, LoadedModel model, CatalogExpectations expectations, CatalogBisector bisector,
                                                 DumpReader ref, SelfTest.Case c, String f) {
        long t0 = System.nanoTime();
        var expected = expectations.of(model, f, ref.manifest());
        return switch (expected) {
            case ExpectedCell.Cell cell -> {
                var b = bisector.runLive(List.of(f));
                var fd = b.firstDivergence();
                String got = fd == null ? "match" : "step " + fd.step() + ", " + fd.point();
                boolean at = fd != null && fd.step() == cell.step() && fd.point().equals(cell.point());
                String named = b.catalog() == null ? null : b.catalog().named();
                Boolean proved = b.catalog() == null ? null : b.catalog().proved();
                String detail = (at ? "" : "expected " + cell.describe() + "; ") + (b.diagnosis() == null ? b.conclusion() : b.diagnosis());
                yield new SelfTestResult.CatalogOutcome(arch, f, c.checkpoint(), c.name(), expected, got, named, proved, at,
                        at && f.equals(named), detail, secs(t0));
            }
            case ExpectedCell.SelfCheckCell sc -> {
                var m = ref.manifest();
                var r = new RecurrentSelfCheck(model, List.of(f)).prefixReuse(m.tokenArray(), m.promptLength());
                String got = r.passed() ? "pass" : "position " + r.position() + ", " + r.point();
                boolean ok = !r.passed() && r.position() != null && r.position() == sc.position() && sc.point().equals(r.point());
                yield new SelfTestResult.CatalogOutcome(arch, f, c.checkpoint(), c.name(), expected, "selfcheck " + sc.check() + ": " + got,
                        null, null, ok, ok, (ok ? "" : "expected " + sc.describe() + "; ") + r.detail(), secs(t0));
            }
            case ExpectedCell.NotApplicable na -> {
                // the case cannot show it: compare must still say match (a fault that leaks elsewhere is a finding)
                var cmp = bisector.compareLive(List.of(f));
                var fd = cmp.firstDivergence();
                String got = fd == null ? "match" : "step " + fd.step() + ", " + fd.point();
                boolean ok = fd == null;
                yield new SelfTestResult.CatalogOutcome(arch, f, c.checkpoint(), c.name(), expected, got, null, null, ok, ok,
                        ok ? na.why() : "expected a match (" + na.why() + "); found " + got, secs(t0));
            }
            default -> throw new IllegalStateException("no " + arch + " rule yields " + expected);
        };
    }

    private static double secs(long t0) { return (System.nanoTime() - t0) / 1e9; }
}
