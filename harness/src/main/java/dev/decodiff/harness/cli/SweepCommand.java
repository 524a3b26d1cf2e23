package dev.decodiff.harness.cli;

import dev.decodiff.engine.Gemma4Config;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.report.ProgressBar;
import dev.decodiff.harness.arch.gemma4.sweep.Boundaries;
import dev.decodiff.harness.arch.gemma4.sweep.Boundary;
import dev.decodiff.harness.arch.gemma4.sweep.EngineScenarios;
import dev.decodiff.harness.arch.gemma4.sweep.Families;
import dev.decodiff.harness.arch.gemma4.sweep.Outcome;
import dev.decodiff.harness.arch.gemma4.sweep.ReproFixture;
import dev.decodiff.harness.arch.gemma4.sweep.Scenario;
import dev.decodiff.harness.arch.gemma4.sweep.ScenarioEngine;
import dev.decodiff.harness.arch.gemma4.sweep.ScenarioJson;
import dev.decodiff.harness.arch.gemma4.sweep.Sweep;
import dev.decodiff.harness.arch.gemma4.sweep.SweepReport;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;

@Command(name = "sweep", mixinStandardHelpOptions = true,
        description = {"Sweeps KV-cache scenarios across the model's boundaries and finds the decode that breaks, with no reference.",
                "Each scenario family runs the same tokens along two schedules (one pass vs prefill + decode, chunked prefill, a speculative verify,",
                "snapshot/restore, a prefix copied to another sequence, truncate and continue, several sequences in one batch) and must give the same rows",
                "at every (sequence, position, capture point); every step is also checked against the KV-integrity rules (a read window covers",
                "exactly what the mask allows; a row read back is the row written, up to the storage type's rounding).",
                "Boundaries come from config.json and the engine's options: W−1, W, W+1, each ring wrap k·W, chunk edges k·c+{0,1}, the cache's capacity.",
                "A family's first failure is minimized (fewest operations, smallest length) and localized to its first cell in causal order;",
                "--repro DIR writes it as a self-contained folder (schedule, weights hash, the failing cell, and a C program against llama.h).",
                "A cut that a sliding ring of the window only cannot honour is expected to be refused; a silent wrong answer there is the finding.",
                "Format of --scenario files and the families: docs/scenarios.md."},
        footer = {"", "Exit codes: 0 every scenario passes (or is refused as designed), 1 a scenario fails, 2 bad input or usage.",
                "Examples:",
                "  decodiff sweep",
                "  decodiff sweep --fault ring-wrap --repro /tmp/ring-wrap",
                "  decodiff sweep --engine llama.cpp --json",
                "  decodiff sweep --scenario my-scenario.json --engine llama.cpp --repro /tmp/repro"})
final class SweepCommand implements Callable<Integer> {
    @Option(names = "--model", paramLabel = "DIR", description = "Checkpoint to sweep (default: the bundled checkpoints/gemma4-tiny).")
    Path model;

    @Option(names = "--scenario", paramLabel = "FILE", description = "Run this scenario (JSON, docs/scenarios.md) instead of the sweep.")
    Path scenario;

    @Option(names = "--family", paramLabel = "NAME", split = ",", description = "Sweep only these families (comma-separated; default all).")
    List<String> families = new ArrayList<>();

    @Option(names = "--max-length", paramLabel = "N", description = "Longest boundary swept (default 3·W+2: the window's edges and two ring wraps).")
    Integer maxLength;

    @Option(names = "--repro", paramLabel = "DIR", description = "Write the first failure, minimized, as a repro folder there.")
    Path repro;

    @Option(names = "--html", paramLabel = "FILE", description = "Also write a self-contained HTML report (every family in every setting, pass / fail / refused-as-designed).")
    Path html;

    @Option(names = "--no-minimize", description = "Report each family's first failure as found, without shrinking it.")
    boolean noMinimize;

    @Option(names = "--progress", description = "Draw a progress bar on stderr (default: when stderr is a terminal).")
    Boolean progress;

    @picocli.CommandLine.Mixin
    EngineFlags engine = new EngineFlags();

    @picocli.CommandLine.Mixin
    LlamaCppFlags llama = new LlamaCppFlags();

    @picocli.CommandLine.Mixin
    JsonOption json = new JsonOption();

    @picocli.CommandLine.Spec
    picocli.CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() {
        Path dir = model != null ? model : SelfCheckCommand.defaultModel();
        var config = Gemma4Config.read(dir.resolve("config.json"));
        var known = Families.all(config).stream().map(Families.Family::name).toList();
        for (var f : families)
            if (!known.contains(f)) throw new BadInputException("--family: unknown family '" + f + "'; the families are " + String.join(", ", known));
        int max = maxLength != null ? maxLength : 3 * config.slidingWindow() + 2;
        if (max < 2) throw new BadInputException("--max-length must be ≥ 2, got " + max);
        var out = spec.commandLine().getOut();
        try (var eng = open(dir, config)) {
            Scenario.Settings base = baseSettings();
            if (scenario != null) return one(eng, ScenarioJson.read(scenario, config), dir, out);
            List<Scenario.Settings> settings = settings(eng, base);
            var chunks = new ArrayList<Integer>(List.of(2, config.slidingWindow() - 1, config.slidingWindow() + 1));
            int capacity = 0;
            if (eng instanceof dev.decodiff.harness.arch.gemma4.sweep.LlamaCppScenarios l) {
                chunks.add(l.ubatch());
                capacity = l.capacity();
            }
            var boundaries = Boundaries.of(config, chunks, capacity, max);
            boolean bar = progress != null ? progress : dev.decodiff.harness.report.Terminal.progressOnStderr();
            var pb = new ProgressBar[1];
            var result = new Sweep(eng).run(settings, boundaries, families, !noMinimize, (done, total, what) -> {
                if (!bar) return;
                if (pb[0] == null) pb[0] = new ProgressBar("sweep", total, System.err, true);
                pb[0].update(done);
            });
            if (pb[0] != null) pb[0].close();
            if (json.on()) out.println(SweepReport.json(result, dir.toString()));
            else out.print(SweepReport.terminal(result, describeModel(dir, config)));
            if (html != null) {
                try {
                    java.nio.file.Files.writeString(html, SweepReport.html(result, describeModel(dir, config)));
                } catch (java.io.IOException e) {
                    throw new BadInputException(html, "cannot write the HTML report (" + e.getMessage() + ")");
                }
            }
            if (repro != null && result.firstFailing() != null) {
                var f = result.firstFailing();
                var m = f.minimized();
                var sc = m != null ? m.scenario() : f.failing();
                var o = m != null ? m.outcome() : f.firstFailure();
                ReproFixture.write(repro, eng, sc, o, dir);
                if (!json.on()) out.println("repro written to " + repro);
            }
            out.flush();
            return result.passed() ? Main.MATCH : Main.DIVERGENCE;
        }
    }

    private int one(ScenarioEngine eng, Scenario sc, Path dir, java.io.PrintWriter out) {
        Outcome o;
        try {
            o = new Sweep(eng).one(sc);
        } catch (dev.decodiff.harness.arch.gemma4.sweep.BadScheduleException e) {
            throw new BadInputException(scenario, e.getMessage() + "; fix the schedule (docs/scenarios.md)");
        }
        out.println("scenario " + sc.name() + " on " + eng.describe() + ": " + o.word());
        sc.describeSchedules().lines().forEach(l -> out.println("  " + l));
        switch (o) {
            case Outcome.Fail f -> out.println("  " + f.kind() + ": " + f.detail());
            case Outcome.Refused r -> out.println("  refused " + r.op() + ": " + r.message());
            case Outcome.NotApplicable n -> out.println("  not applicable: " + n.why());
            case Outcome.Pass p -> out.println(String.format(Locale.ROOT, "  %d shared cells agree, worst rel L2 %.2e", p.cells(), p.worstRelL2()));
        }
        if (repro != null && o instanceof Outcome.Fail f) {
            ReproFixture.write(repro, eng, sc, f, dir);
            out.println("repro written to " + repro);
        }
        out.flush();
        return o.failed() ? Main.DIVERGENCE : Main.MATCH;
    }

    private ScenarioEngine open(Path dir, Gemma4Config config) {
        if (llama.isLlamaCpp()) {
            var gguf = llama.resolveGguf(dir, false);
            int threads = llama.threads == null ? 1 : llama.threads;
            return new dev.decodiff.harness.arch.gemma4.sweep.LlamaCppScenarios(gguf, config, threads);
        }
        var m = Gemma4Model.load(dir);
        return new EngineScenarios(m, engine.options());
    }

    /** --kv-cache as a setting (both engines), with llama.cpp's --flash-attn. */
    private Scenario.Settings baseSettings() {
        String k = "f32", v = "f32";
        if (engine.kvCache != null) {
            var parts = engine.kvCache.split(",", -1);
            k = parts[0].strip().toLowerCase(Locale.ROOT);
            v = parts.length == 2 ? parts[1].strip().toLowerCase(Locale.ROOT) : k;
        }
        // decodiff's engine keeps a ring of the window only on sliding layers; llama.cpp's sweep starts from swa_full
        return new Scenario.Settings(k, v, llama.flashAttn, llama.isLlamaCpp(), 0, 0, 0);
    }

    /** The settings swept: --kv-cache alone when given; otherwise each engine's precision configurations. */
    private List<Scenario.Settings> settings(ScenarioEngine eng, Scenario.Settings base) {
        if (engine.kvCache != null || llama.flashAttn) return List.of(base);
        if (eng instanceof dev.decodiff.harness.arch.gemma4.sweep.LlamaCppScenarios l) return l.defaultSettings();
        return List.of(base, base.withKv("bf16", "bf16"), base.withKv("q8_0", "q4_0"));
    }

    private static String describeModel(Path dir, Gemma4Config c) {
        long sliding = c.layers().stream().filter(l -> l.type() == dev.decodiff.engine.LayerType.SLIDING).count();
        return dir + " (W=" + c.slidingWindow() + ", " + c.numLayers() + " layers, " + sliding + " sliding, " + c.numKvSharedLayers() + " KV-shared)";
    }
}
