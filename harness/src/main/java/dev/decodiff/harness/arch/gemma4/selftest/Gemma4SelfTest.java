package dev.decodiff.harness.arch.gemma4.selftest;

import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.Fault;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.engine.LayerType;
import dev.decodiff.harness.arch.gemma4.bisect.Bisector;
import dev.decodiff.harness.arch.gemma4.bisect.VariantMargins;
import dev.decodiff.harness.arch.gemma4.selfcheck.PolicyChecks;
import dev.decodiff.harness.arch.gemma4.selfcheck.SelfCheck;
import dev.decodiff.harness.bisect.BisectResult;
import dev.decodiff.harness.compare.ToleranceProfile;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.selfcheck.SelfCheckResult;
import dev.decodiff.harness.selftest.ExpectedCell;
import dev.decodiff.harness.selftest.SelfTest;
import dev.decodiff.harness.selftest.SelfTestResult;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.function.Consumer;

/**
 * Gemma 4's catalog on one bundled checkpoint: per case the clean engine must match and every fault must be localized
 * by compare and bisect at the cell {@link Gemma4Expectations} fixes (bisect naming its op variant); per fault the
 * reference-free selfcheck must stay quiet or raise its alarm; and the variant margins of the first layer.
 */
public final class Gemma4SelfTest {
    private final ToleranceProfile profile;

    public Gemma4SelfTest(ToleranceProfile profile) { this.profile = profile; }

    public SelfTest.CheckpointRun checkpoint(String ckpt, List<SelfTest.Case> cases, Consumer<String> progress) {
        var outcomes = new ArrayList<SelfTestResult.Outcome>();
        var checks = new ArrayList<SelfTestResult.SelfCheckOutcome>();
        var margins = new ArrayList<SelfTestResult.VariantMargin>();
        try (var model = Gemma4Model.load(cases.get(0).model())) {
            float[] scalars = new float[model.config().numLayers()];
            for (int i = 0; i < scalars.length; i++) scalars[i] = model.weights().layers().get(i).layerScalar();
            for (var c : cases) {
                progress.accept(ckpt + "/" + c.name());
                var ref = DumpReader.open(c.dir());
                outcomes.add(clean(model, ref, c));
                for (Fault f : Fault.values()) {
                    var expected = Gemma4Expectations.cell(f, model.config(), scalars, ref.manifest());
                    outcomes.add(faulty(model, ref, c, f, expected));
                }
            }
            progress.accept(ckpt + " selfcheck");
            checks.add(selfCheck(model, ckpt, null));
            for (Fault f : Fault.values()) checks.add(selfCheck(model, ckpt, f));
            // Variant margins from the case with the longest prompt: only a prefill longer than the window shows the
            // window variants at step 0.
            var longest = cases.stream().max(java.util.Comparator.comparingInt(c -> DumpReader.open(c.dir()).manifest().promptLength())).orElseThrow();
            for (var m : VariantMargins.firstLayer(model, DumpReader.open(longest.dir()), profile))
                margins.add(new SelfTestResult.VariantMargin(ckpt, m));
        }
        return new SelfTest.CheckpointRun(outcomes, checks, margins);
    }

    private SelfTestResult.Outcome clean(Gemma4Model model, DumpReader ref, SelfTest.Case c) {
        long t0 = System.nanoTime();
        var cmp = new Bisector(model, EngineOptions.defaults(), ref, profile).compare();
        var fd = cmp.firstDivergence();
        String got = fd == null ? "match" : "step " + fd.step() + ", " + fd.point();
        var naming = fd == null ? null : new SelfTestResult.Naming(null, fd.variant(), fd.relL2(), fd.tolerance());
        return new SelfTestResult.Outcome(null, c.checkpoint(), c.name(), new ExpectedCell.NotApplicable("clean"), got, null, fd == null,
                fd == null ? "no alarm" : "false alarm: " + got + (fd.diagnosis() != null ? " (" + fd.diagnosis() + ")" : ""), secs(t0), naming);
    }

    private SelfTestResult.Outcome faulty(Gemma4Model model, DumpReader ref, SelfTest.Case c, Fault f, ExpectedCell expected) {
        long t0 = System.nanoTime();
        var options = EngineOptions.defaults().withFaults(Set.of(f));
        return switch (expected) {
            case ExpectedCell.NotApplicable na -> new SelfTestResult.Outcome(f, c.checkpoint(), c.name(), expected, null, null, true, na.why(), 0);
            case ExpectedCell.Cell cell -> {
                var bisector = new Bisector(model, options, ref, profile);
                var cmp = bisector.compare();
                var fd = cmp.firstDivergence();
                String compareGot = fd == null ? "match" : "step " + fd.step() + ", " + fd.point();
                boolean compareOk = fd != null && fd.step() == cell.step() && fd.point().equals(cell.point());
                BisectResult b = bisector.bisect(cmp);
                var cu = b.culprit();
                String bisectGot = cu == null ? (fd == null ? "match" : "no culprit") : "step " + cu.step() + ", " + cu.point();
                boolean bisectOk = cu != null && cu.step() == cell.step() && cu.point().equals(cell.point());
                String detail = (compareOk && bisectOk ? "" : "expected " + cell.describe() + "; ")
                        + (b.healedBy().isEmpty() ? "" : "healed by " + String.join(", ", b.healedBy()) + "; ")
                        + (b.diagnosis() == null ? "no diagnosis" : b.diagnosis());
                var naming = new SelfTestResult.Naming(Gemma4Expectations.variant(f, model.config(), expected), b.variant(),
                        fd == null ? Double.NaN : fd.relL2(), fd == null ? Double.NaN : fd.tolerance());
                yield new SelfTestResult.Outcome(f, c.checkpoint(), c.name(), expected, compareGot, bisectGot, compareOk && bisectOk, detail, secs(t0), naming);
            }
            case ExpectedCell.EngineThrows et -> {
                var bisector = new Bisector(model, options, ref, profile);
                var cmp = bisector.compare();
                var failure = cmp.engineFailure();
                var fd = cmp.firstDivergence();
                String compareGot = fd != null ? "step " + fd.step() + ", " + fd.point()
                        : failure != null ? "threw at step " + failure.step() : "match";
                boolean compareOk = fd == null && failure != null && failure.step() == et.step();
                var b = bisector.bisect(cmp);
                boolean bisectOk = b.verdict().equals("engine_threw") && b.exitCode() == 1;
                String detail = (compareOk && bisectOk ? "" : "expected " + et.describe() + "; ") + (failure == null ? "no exception" : failure.what());
                yield new SelfTestResult.Outcome(f, c.checkpoint(), c.name(), expected, compareGot, b.verdict(), compareOk && bisectOk, detail, secs(t0));
            }
            case ExpectedCell.NoNumericDivergence nd -> {
                var cmp = new Bisector(model, options, ref, profile).compare();
                var fd = cmp.firstDivergence();
                String compareGot = fd == null ? "match" : "step " + fd.step() + ", " + fd.point();
                var manifest = ref.manifest();
                var check = new SelfCheck(model, options).positionsPerDecodeStep(manifest.tokenArray(), manifest.promptLength());
                boolean ok = fd == null && !check.passed() && check.check().equals(nd.check());
                yield new SelfTestResult.Outcome(f, c.checkpoint(), c.name(), expected, compareGot, "selfcheck " + nd.check() + ": " + (check.passed() ? "pass" : "FAIL"),
                        ok, check.detail(), secs(t0));
            }
            case ExpectedCell.SelfCheckCell sc -> {
                var m = ref.manifest();
                var checks = new PolicyChecks(model, options);
                SelfCheckResult r = switch (sc.check()) {
                    case "prefix-reuse" -> checks.prefixReuse(m.tokenArray(), m.promptLength());
                    case "truncate-sliding" -> checks.truncateToSharedPrefix(m.tokenArray(), m.promptLength());
                    default -> throw new IllegalStateException("no policy check " + sc.check());
                };
                String got = r.passed() ? "pass" : "position " + r.position() + ", " + r.point();
                boolean ok = !r.passed() && r.position() != null && r.position() == sc.position() && sc.point().equals(r.point());
                yield new SelfTestResult.Outcome(f, c.checkpoint(), c.name(), expected, null, "selfcheck " + sc.check() + ": " + got, ok,
                        (ok ? "" : "expected " + sc.describe() + "; ") + r.detail(), secs(t0));
            }
        };
    }

    private SelfTestResult.SelfCheckOutcome selfCheck(Gemma4Model model, String ckpt, Fault f) {
        var cfg = model.config();
        boolean applicable = f == null || switch (f) {
            case K_EQ_V_ROTATED_KEYS -> cfg.layers().stream().anyMatch(l -> l.kEqV());
            case RING_WRAP, SLIDING_WINDOW_OFF_BY_ONE, SLIDING_TRUNCATE -> cfg.layers().stream().anyMatch(l -> l.type() == LayerType.SLIDING);
            case KV_SHARED_FIRST_SOURCE -> cfg.numKvSharedLayers() > 0;
            default -> true;
        };
        if (!applicable) return new SelfTestResult.SelfCheckOutcome(f, ckpt, false, false, SelfTest.SELFCHECK_REQUIRED.contains(f), null);
        var options = f == null ? EngineOptions.defaults() : EngineOptions.defaults().withFaults(Set.of(f));
        var check = new SelfCheck(model, options);
        var first = check.firstFailure(check.defaultTokens(), check.defaultPromptLength()).orElse(null);
        String firstFailure = first == null ? null : first.check() + (first.point() != null ? " at position " + first.position() + ", " + first.point() : "")
                + ": " + first.detail();
        return new SelfTestResult.SelfCheckOutcome(f, ckpt, true, first != null, f != null && SelfTest.SELFCHECK_REQUIRED.contains(f), firstFailure);
    }

    private static double secs(long t0) { return (System.nanoTime() - t0) / 1e9; }
}
