package dev.decodiff.harness.selftest;

import dev.decodiff.engine.arch.Architectures;
import dev.decodiff.engine.qwen35.Qwen35Architecture;
import dev.decodiff.engine.qwen35.Qwen35Config;
import dev.decodiff.engine.qwen35.Qwen35Fault;
import dev.decodiff.harness.bisect.CatalogBisector;
import dev.decodiff.harness.bisect.CatalogReplays;
import dev.decodiff.harness.compare.ToleranceProfile;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.selfcheck.RecurrentSelfCheck;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;

/**
 * The self-test of Qwen3.5's catalog on one bundled checkpoint: per case the clean engine must match the transformers
 * reference, and every fault planted in the engine must be localized by compare at the cell {@link Qwen35Expectations}
 * resolves from the catalog's rule, and named by bisect (the fault itself, by replay) — or, where the case cannot show
 * it, leave compare at match; the one fault that needs a restore is found by selfcheck's prefix-reuse at its cell.
 */
final class CatalogSelfTest {
    private final ToleranceProfile profile;

    CatalogSelfTest(ToleranceProfile profile) { this.profile = profile; }

    List<SelfTestResult.CatalogOutcome> checkpoint(String ckpt, List<SelfTest.Case> cases, Consumer<String> progress) {
        var out = new ArrayList<SelfTestResult.CatalogOutcome>();
        try (var model = Architectures.load(cases.get(0).model())) {
            String arch = model.architecture().name();
            var cfg = ((Qwen35Architecture.Loaded) model).model().config();
            for (var c : cases) {
                progress.accept(ckpt + "/" + c.name());
                var ref = DumpReader.open(c.dir());
                // one set of replays per case: bisect of every fault asks its cell of the same runs
                var bisector = new CatalogBisector(model, ref, profile, new CatalogReplays(model, ref.manifest(), true));
                out.add(clean(arch, bisector, c));
                for (var f : Qwen35Fault.values()) out.add(faulty(arch, model, cfg, bisector, ref, c, f));
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

    private SelfTestResult.CatalogOutcome faulty(String arch, dev.decodiff.engine.arch.LoadedModel model, Qwen35Config cfg, CatalogBisector bisector,
                                                 DumpReader ref, SelfTest.Case c, Qwen35Fault f) {
        long t0 = System.nanoTime();
        var expected = Qwen35Expectations.of(f, cfg, ref.manifest());
        return switch (expected) {
            case ExpectedCell.Cell cell -> {
                var b = bisector.runLive(List.of(f.id()));
                var fd = b.firstDivergence();
                String got = fd == null ? "match" : "step " + fd.step() + ", " + fd.point();
                boolean at = fd != null && fd.step() == cell.step() && fd.point().equals(cell.point());
                String named = b.catalog() == null ? null : b.catalog().named();
                Boolean proved = b.catalog() == null ? null : b.catalog().proved();
                String detail = (at ? "" : "expected " + cell.describe() + "; ") + (b.diagnosis() == null ? b.conclusion() : b.diagnosis());
                yield new SelfTestResult.CatalogOutcome(arch, f.id(), c.checkpoint(), c.name(), expected, got, named, proved, at,
                        at && f.id().equals(named), detail, secs(t0));
            }
            case ExpectedCell.SelfCheckCell sc -> {
                var m = ref.manifest();
                var r = new RecurrentSelfCheck(model, List.of(f.id())).prefixReuse(m.tokenArray(), m.promptLength());
                String got = r.passed() ? "pass" : "position " + r.position() + ", " + r.point();
                boolean ok = !r.passed() && r.position() != null && r.position() == sc.position() && sc.point().equals(r.point());
                yield new SelfTestResult.CatalogOutcome(arch, f.id(), c.checkpoint(), c.name(), expected, "selfcheck " + sc.check() + ": " + got,
                        null, null, ok, ok, (ok ? "" : "expected " + sc.describe() + "; ") + r.detail(), secs(t0));
            }
            case ExpectedCell.NotApplicable na -> {
                // the case cannot show it: compare must still say match (a fault that leaks elsewhere is a finding)
                var cmp = bisector.compareLive(List.of(f.id()));
                var fd = cmp.firstDivergence();
                String got = fd == null ? "match" : "step " + fd.step() + ", " + fd.point();
                boolean ok = fd == null;
                yield new SelfTestResult.CatalogOutcome(arch, f.id(), c.checkpoint(), c.name(), expected, got, null, null, ok, ok,
                        ok ? na.why() : "expected a match (" + na.why() + "); found " + got, secs(t0));
            }
            default -> throw new IllegalStateException("no Qwen3.5 rule yields " + expected);
        };
    }

    private static double secs(long t0) { return (System.nanoTime() - t0) / 1e9; }
}
