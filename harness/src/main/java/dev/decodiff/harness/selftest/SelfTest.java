package dev.decodiff.harness.selftest;

import dev.decodiff.engine.CheckpointFiles;
import dev.decodiff.engine.Fault;
import dev.decodiff.engine.arch.Architectures;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.arch.ArchitectureSupport;
import dev.decodiff.harness.arch.ArchitectureSupports;
import dev.decodiff.harness.compare.ToleranceProfile;
import dev.decodiff.harness.dump.DumpManifest;
import dev.decodiff.harness.dump.DumpReader;

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
 * and raise an alarm on the faults it is required to catch. Each family's plug-in runs its own catalog: a whole one on
 * its tunable engine (Gemma 4's, {@code EngineSelfTest}), or one run through the seam ({@link CatalogSelfTest},
 * Qwen3.5's, the Llama family's). Each checkpoint is loaded once.
 */
public final class SelfTest {
    /** The faults selfcheck must catch with no reference at all (issue 4). */
    public static final Set<Fault> SELFCHECK_REQUIRED = EnumSet.of(Fault.K_EQ_V_ROTATED_KEYS, Fault.RING_WRAP, Fault.DECODE_RECOMPUTE);

    private final ToleranceProfile profile = ToleranceProfile.defaults();

    /** Which halves run: Gemma 4's catalog and the other architectures' (Qwen3.5's, the Llama family's); the command runs both. */
    public enum Part { ALL, GEMMA4, OTHER_CATALOGS }

    private final Part part;

    public SelfTest() { this(Part.ALL); }

    /** A self-test of one half only (each half has its own test class, so neither waits on the other). */
    public SelfTest(Part part) { this.part = part; }

    /** A reference case: reference-dumps/CHECKPOINT/NAME, fp32, made from checkpoints/CHECKPOINT. */
    public record Case(String checkpoint, String name, Path dir, Path model) {}

    /** Every fp32 case under home/reference-dumps whose checkpoint is bundled under home/checkpoints, by checkpoint. */
    public static Map<String, List<Case>> cases(Path home) { return cases(home, modelTypes(ArchitectureSupport::engineSelfTest)::contains, true); }

    /** The fp32 cases of checkpoints whose engine has another architecture's catalog (Qwen3.5, the Llama family), by checkpoint. */
    public static Map<String, List<Case>> catalogCases(Path home) {
        return cases(home, modelTypes(ArchitectureSupport::catalogExpectations)::contains, false);
    }

    /** The model types of the architectures whose plug-in offers this self-test. */
    private static List<String> modelTypes(java.util.function.Function<ArchitectureSupport, java.util.Optional<?>> selfTest) {
        return ArchitectureSupports.offering(selfTest).stream().flatMap(s -> s.architecture().modelTypes().stream()).toList();
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
            var futures = new ArrayList<java.util.concurrent.Future<CheckpointRun>>();
            // the catalog checkpoints first: on few cores they would otherwise wait behind every Gemma 4 one
            var catalogFutures = new ArrayList<java.util.concurrent.Future<List<SelfTestResult.CatalogOutcome>>>();
            for (var e : catalogCases.entrySet())
                catalogFutures.add(pool.submit(() -> new CatalogSelfTest(profile).checkpoint(e.getKey(), e.getValue(), progress)));
            for (var e : cases.entrySet()) futures.add(pool.submit(() -> checkpoint(e.getKey(), e.getValue(), progress)));
            var outcomes = new ArrayList<SelfTestResult.Outcome>();
            var checks = new ArrayList<SelfTestResult.SelfCheckOutcome>();
            var margins = new ArrayList<SelfTestResult.VariantMargin>();
            for (var f : futures) {
                CheckpointRun c = get(f);
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

    /** What one checkpoint of a family's whole catalog gave: compare and bisect per case, selfcheck, the variant margins. */
    public record CheckpointRun(List<SelfTestResult.Outcome> outcomes, List<SelfTestResult.SelfCheckOutcome> checks,
                                List<SelfTestResult.VariantMargin> margins) {}

    private CheckpointRun checkpoint(String ckpt, List<Case> cases, Consumer<String> progress) {
        var support = ArchitectureSupports.of(Architectures.of(cases.get(0).model()));
        return support.engineSelfTest().orElseThrow().checkpoint(ckpt, cases, profile, progress);
    }

}
