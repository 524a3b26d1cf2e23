package dev.decodiff.harness.arch.gemma4.sweep;

import dev.decodiff.engine.Gemma4Config;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.arch.SweepSupport;
import dev.decodiff.harness.report.ProgressBar;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/** Gemma 4's sweep: the scenario families built from its sliding window, on its engine or on llama.cpp. */
public final class Gemma4Sweep implements SweepSupport {
    public static final Gemma4Sweep INSTANCE = new Gemma4Sweep();

    private Gemma4Sweep() {}

    @Override
    public boolean run(Request r, PrintWriter out) {
        Path dir = r.dir();
        var families = r.families();
        var scenario = r.scenario();
        var repro = r.repro();
        var config = Gemma4Config.read(dir.resolve("config.json"));
        var known = Families.all(config).stream().map(Families.Family::name).toList();
        for (var f : families)
            if (!known.contains(f)) throw new BadInputException("--family: unknown family '" + f + "'; the families are " + String.join(", ", known));
        int max = r.maxLength() != null ? r.maxLength() : 3 * config.slidingWindow() + 2;
        if (max < 2) throw new BadInputException("--max-length must be ≥ 2, got " + max);
        try (var eng = open(r, config)) {
            Scenario.Settings base = baseSettings(r);
            if (scenario != null) return one(eng, ScenarioJson.read(scenario, config), dir, scenario, repro, out);
            List<Scenario.Settings> settings = settings(r, eng, base);
            var chunks = new ArrayList<Integer>(List.of(2, config.slidingWindow() - 1, config.slidingWindow() + 1));
            int capacity = 0;
            if (eng instanceof LlamaCppScenarios l) {
                chunks.add(l.ubatch());
                capacity = l.capacity();
            }
            var boundaries = Boundaries.of(config, chunks, capacity, max);
            boolean bar = r.progress() != null ? r.progress() : dev.decodiff.harness.report.Terminal.progressOnStderr();
            var pb = new ProgressBar[1];
            var result = new Sweep(eng).run(settings, boundaries, families, r.minimize(), (done, total, what) -> {
                if (!bar) return;
                if (pb[0] == null) pb[0] = new ProgressBar("sweep", total, System.err, true);
                pb[0].update(done);
            });
            if (pb[0] != null) pb[0].close();
            if (r.json()) out.println(SweepReport.json(result, dir.toString()));
            else out.print(SweepReport.terminal(result, describeModel(dir, config)));
            if (r.html() != null) {
                try {
                    java.nio.file.Files.writeString(r.html(), SweepReport.html(result, describeModel(dir, config)));
                } catch (java.io.IOException e) {
                    throw new BadInputException(r.html(), "cannot write the HTML report (" + e.getMessage() + ")");
                }
            }
            if (repro != null && result.firstFailing() != null) {
                var f = result.firstFailing();
                var m = f.minimized();
                var sc = m != null ? m.scenario() : f.failing();
                var o = m != null ? m.outcome() : f.firstFailure();
                ReproFixture.write(repro, eng, sc, o, dir);
                if (!r.json()) out.println("repro written to " + repro);
            }
            out.flush();
            return result.passed();
        }
    }

    private static boolean one(ScenarioEngine eng, Scenario sc, Path dir, Path scenario, Path repro, PrintWriter out) {
        Outcome o;
        try {
            o = new Sweep(eng).one(sc);
        } catch (BadScheduleException e) {
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
        return !o.failed();
    }

    private static ScenarioEngine open(Request r, Gemma4Config config) {
        if (r.llamaCpp().getAsBoolean()) {
            var gguf = r.gguf().get();
            int threads = r.threads();
            return new LlamaCppScenarios(gguf, config, threads);
        }
        var m = Gemma4Model.load(r.dir());
        return new EngineScenarios(m, r.options().get());
    }

    /** --kv-cache as a setting (both engines), with llama.cpp's --flash-attn. */
    private static Scenario.Settings baseSettings(Request r) {
        String k = "f32", v = "f32";
        if (r.kvCache() != null) {
            var parts = r.kvCache().split(",", -1);
            k = parts[0].strip().toLowerCase(Locale.ROOT);
            v = parts.length == 2 ? parts[1].strip().toLowerCase(Locale.ROOT) : k;
        }
        // decodiff's engine keeps a ring of the window only on sliding layers; llama.cpp's sweep starts from swa_full
        return new Scenario.Settings(k, v, r.flashAttn(), r.llamaCpp().getAsBoolean(), 0, 0, 0);
    }

    /** The settings swept: --kv-cache alone when given; otherwise each engine's precision configurations. */
    private static List<Scenario.Settings> settings(Request r, ScenarioEngine eng, Scenario.Settings base) {
        if (r.kvCache() != null || r.flashAttn()) return List.of(base);
        if (eng instanceof LlamaCppScenarios l) return l.defaultSettings();
        return List.of(base, base.withKv("bf16", "bf16"), base.withKv("q8_0", "q4_0"));
    }

    private static String describeModel(Path dir, Gemma4Config c) {
        long sliding = c.layers().stream().filter(l -> l.type() == dev.decodiff.engine.LayerType.SLIDING).count();
        return dir + " (W=" + c.slidingWindow() + ", " + c.numLayers() + " layers, " + sliding + " sliding, " + c.numKvSharedLayers() + " KV-shared)";
    }
}
