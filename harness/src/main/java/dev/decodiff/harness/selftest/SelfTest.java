package dev.decodiff.harness.selftest;

import dev.decodiff.engine.CheckpointFiles;
import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.Fault;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.engine.LayerType;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.bisect.BisectResult;
import dev.decodiff.harness.arch.gemma4.bisect.Bisector;
import dev.decodiff.harness.arch.gemma4.bisect.VariantMargins;
import dev.decodiff.harness.compare.ToleranceProfile;
import dev.decodiff.harness.dump.DumpManifest;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.arch.gemma4.selfcheck.PolicyChecks;
import dev.decodiff.harness.arch.gemma4.selfcheck.SelfCheck;
import dev.decodiff.harness.selfcheck.SelfCheckResult;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Consumer;
import java.util.stream.Stream;

/**
 * The harness judged on itself: every catalog fault on every bundled checkpoint and every fp32 reference
 * case where it applies must be localized by compare (first divergence) and bisect (culprit) to the cell
 * {@link ExpectedCell} fixes from the math; every clean case must match; selfcheck must stay quiet on clean checkpoints
 * and raise an alarm on the faults it is required to catch. Qwen3.5's catalog runs on its own checkpoints
 * ({@link CatalogSelfTest}). Each checkpoint is loaded once.
 */
public final class SelfTest {
    /** The faults selfcheck must catch with no reference at all (issue 4). */
    public static final Set<Fault> SELFCHECK_REQUIRED = EnumSet.of(Fault.K_EQ_V_ROTATED_KEYS, Fault.RING_WRAP, Fault.DECODE_RECOMPUTE);

    private final ToleranceProfile profile = ToleranceProfile.defaults();

    /** Which halves run: Gemma 4's catalog and the other architectures' (Qwen3.5's); the command runs both. */
    public enum Part { ALL, GEMMA4, OTHER_CATALOGS }

    private final Part part;

    public SelfTest() { this(Part.ALL); }

    /** A self-test of one half only (each half has its own test class, so neither waits on the other). */
    public SelfTest(Part part) { this.part = part; }

    /** A reference case: reference-dumps/CHECKPOINT/NAME, fp32, made from checkpoints/CHECKPOINT. */
    public record Case(String checkpoint, String name, Path dir, Path model) {}

    /** Every fp32 case under home/reference-dumps whose checkpoint is bundled under home/checkpoints, by checkpoint. */
    public static Map<String, List<Case>> cases(Path home) { return cases(home, "gemma4_text"::equals, true); }

    /** The fp32 cases of checkpoints whose engine has another architecture's catalog (Qwen3.5), by checkpoint. */
    public static Map<String, List<Case>> catalogCases(Path home) {
        return cases(home, t -> dev.decodiff.engine.qwen35.Qwen35Architecture.INSTANCE.modelTypes().contains(t), false);
    }

    private static Map<String, List<Case>> cases(Path home, java.util.function.Predicate<String> modelType, boolean required) {
        Path root = home.resolve("reference-dumps");
        if (!Files.isDirectory(root)) throw new BadInputException(root, "missing: the self-test needs the bundled reference dumps");
        var out = new LinkedHashMap<String, List<Case>>();
        try (Stream<Path> s = Files.walk(root, 2)) {
            for (Path dir : s.filter(p -> Files.isRegularFile(p.resolve(DumpManifest.FILE_NAME))).sorted().toList()) {
                var m = DumpReader.parseManifest(dir.resolve(DumpManifest.FILE_NAME));
                if (m.producer() == null || !"float32".equals(m.producer().dtype())) continue;
                // The catalog faults are the engine's math, not its weights: the float checkpoints judge them (the
                // quantized ones hold the same models again, dequantized; compare tests them against their references).
                if (m.producer().quantization() != null) continue;
                // each architecture's catalog is self-tested on its own checkpoints' references
                if (m.model() == null || !modelType.test(m.model().modelType())) continue;
                String ckpt = dir.getParent().getFileName().toString();
                Path model = home.resolve("checkpoints").resolve(ckpt);
                if (!Files.isRegularFile(model.resolve("config.json"))) continue;
                if (!m.model().configSha256().equals(CheckpointFiles.sha256(model.resolve("config.json")))) continue;
                out.computeIfAbsent(ckpt, k -> new ArrayList<>()).add(new Case(ckpt, dir.getFileName().toString(), dir, model));
            }
        } catch (IOException e) {
            throw new BadInputException(root, "cannot list: " + e.getMessage());
        }
        if (out.isEmpty() && required) throw new BadInputException(root, "holds no fp32 case of a bundled checkpoint");
        var sorted = new java.util.TreeMap<String, List<Case>>(out);
        out.clear();
        out.putAll(sorted);
        out.values().forEach(l -> l.sort(java.util.Comparator.comparing(Case::name, SelfTest::caseOrder)));
        return out;
    }

    /** short before long, then by name. */
    private static int caseOrder(String a, String b) {
        int ra = a.equals("short") ? 0 : a.equals("long") ? 1 : 2, rb = b.equals("short") ? 0 : b.equals("long") ? 1 : 2;
        return ra != rb ? Integer.compare(ra, rb) : a.compareTo(b);
    }

    public SelfTestResult run(Path home, Consumer<String> progress) {
        long t0 = System.nanoTime();
        var cases = part == Part.OTHER_CATALOGS ? Map.<String, List<Case>>of() : cases(home);
        var catalogCases = part == Part.GEMMA4 ? Map.<String, List<Case>>of() : catalogCases(home);
        // One task per checkpoint; they share nothing (each loads its model), and the engine's results do not depend
        // on how its work is split over threads, so running them side by side changes no number.
        int threads = Math.max(1, Math.min(cases.size() + catalogCases.size(), Integer.getInteger("decodiff.selftest.threads", Runtime.getRuntime().availableProcessors())));
        var pool = java.util.concurrent.Executors.newFixedThreadPool(threads, r -> {
            var t = new Thread(r, "selftest");
            t.setDaemon(true);
            return t;
        });
        try {
            var futures = new ArrayList<java.util.concurrent.Future<Checkpoint>>();
            // the catalog checkpoints first: on few cores they would otherwise wait behind every Gemma 4 one
            var catalogFutures = new ArrayList<java.util.concurrent.Future<List<SelfTestResult.CatalogOutcome>>>();
            for (var e : catalogCases.entrySet())
                catalogFutures.add(pool.submit(() -> new CatalogSelfTest(profile).checkpoint(e.getKey(), e.getValue(), progress)));
            for (var e : cases.entrySet()) futures.add(pool.submit(() -> checkpoint(e.getKey(), e.getValue(), progress)));
            var outcomes = new ArrayList<SelfTestResult.Outcome>();
            var checks = new ArrayList<SelfTestResult.SelfCheckOutcome>();
            var margins = new ArrayList<SelfTestResult.VariantMargin>();
            for (var f : futures) {
                Checkpoint c = get(f);
                outcomes.addAll(c.outcomes());
                checks.addAll(c.checks());
                margins.addAll(c.margins());
            }
            var catalog = new ArrayList<SelfTestResult.CatalogOutcome>();
            for (var f : catalogFutures) catalog.addAll(get(f));
            return new SelfTestResult(List.copyOf(cases.keySet()), outcomes, checks, margins, (System.nanoTime() - t0) / 1e9,
                    List.copyOf(catalogCases.keySet()), catalog);
        } finally {
            pool.shutdownNow();
        }
    }

    private static <T> T get(java.util.concurrent.Future<T> f) {
        try {
            return f.get();
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("self-test interrupted", ex);
        } catch (java.util.concurrent.ExecutionException ex) {
            if (ex.getCause() instanceof RuntimeException re) throw re;
            if (ex.getCause() instanceof Error err) throw err;
            throw new IllegalStateException(ex.getCause());
        }
    }

    private record Checkpoint(List<SelfTestResult.Outcome> outcomes, List<SelfTestResult.SelfCheckOutcome> checks,
                              List<SelfTestResult.VariantMargin> margins) {}

    private Checkpoint checkpoint(String ckpt, List<Case> cases, Consumer<String> progress) {
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
                    var expected = ExpectedCell.of(f, model.config(), scalars, ref.manifest());
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
        return new Checkpoint(outcomes, checks, margins);
    }

    private SelfTestResult.Outcome clean(Gemma4Model model, DumpReader ref, Case c) {
        long t0 = System.nanoTime();
        var cmp = new Bisector(model, EngineOptions.defaults(), ref, profile).compare();
        var fd = cmp.firstDivergence();
        String got = fd == null ? "match" : "step " + fd.step() + ", " + fd.point();
        var naming = fd == null ? null : new SelfTestResult.Naming(null, fd.variant(), fd.relL2(), fd.tolerance());
        return new SelfTestResult.Outcome(null, c.checkpoint(), c.name(), new ExpectedCell.NotApplicable("clean"), got, null, fd == null,
                fd == null ? "no alarm" : "false alarm: " + got + (fd.diagnosis() != null ? " (" + fd.diagnosis() + ")" : ""), secs(t0), naming);
    }

    private SelfTestResult.Outcome faulty(Gemma4Model model, DumpReader ref, Case c, Fault f, ExpectedCell expected) {
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
                var naming = new SelfTestResult.Naming(ExpectedVariant.of(f, model.config(), expected), b.variant(),
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
        if (!applicable) return new SelfTestResult.SelfCheckOutcome(f, ckpt, false, false, SELFCHECK_REQUIRED.contains(f), null);
        var options = f == null ? EngineOptions.defaults() : EngineOptions.defaults().withFaults(Set.of(f));
        var check = new SelfCheck(model, options);
        var first = check.firstFailure(check.defaultTokens(), check.defaultPromptLength()).orElse(null);
        String firstFailure = first == null ? null : first.check() + (first.point() != null ? " at position " + first.position() + ", " + first.point() : "")
                + ": " + first.detail();
        return new SelfTestResult.SelfCheckOutcome(f, ckpt, true, first != null, f != null && SELFCHECK_REQUIRED.contains(f), firstFailure);
    }

    private static double secs(long t0) { return (System.nanoTime() - t0) / 1e9; }

}
