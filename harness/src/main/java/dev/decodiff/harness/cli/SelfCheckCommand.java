package dev.decodiff.harness.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import dev.decodiff.engine.Fault;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.live.ModelLocator;
import dev.decodiff.harness.report.Fmt;
import dev.decodiff.harness.report.Terminal;
import dev.decodiff.harness.selfcheck.SelfCheck;
import dev.decodiff.harness.selfcheck.SelfCheckResult;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.Callable;

@Command(name = "selfcheck", mixinStandardHelpOptions = true,
        description = {"Checks the engine against itself, with no reference: decode vs prefill, chunking, cache reads vs writes, cache policies, work.",
                "The same tokens computed along different paths must agree to fp32 noise (prompt + decode vs one pass, chunked prefill vs one pass, probes attached vs none, prefix reuse, multi-turn, snapshot restore),",
                "every read window must hold what entered the cache, a decode step must process 1 position, and a sliding ring must refuse a cut it cannot honour.",
                "A disagreement is localized to its first (position, capture point)."},
        footer = {"", "Exit codes: 0 every check passes, 1 a check fails, 2 bad input or usage.",
                "Examples:",
                "  decodiff selfcheck",
                "  decodiff selfcheck --model checkpoints/gemma4-tiny-ple --fault ring-wrap --json"})
final class SelfCheckCommand implements Callable<Integer> {
    private static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

    @Option(names = "--model", paramLabel = "DIR", description = "Checkpoint to check (default: the bundled checkpoints/gemma4-tiny).")
    Path model;

    @picocli.CommandLine.Mixin
    EngineFlags engine = new EngineFlags();

    @Option(names = "--json", description = "Print the machine-readable result (JSON) on stdout instead of the table.")
    boolean json;

    @picocli.CommandLine.Spec
    picocli.CommandLine.Model.CommandSpec spec;

    static Path defaultModel() {
        Path tiny = Home.get().resolve("checkpoints/gemma4-tiny");
        if (Files.isRegularFile(tiny.resolve("config.json"))) return tiny;
        var all = ModelLocator.bundled(Home.get());
        if (all.isEmpty()) throw new BadInputException(Home.get().resolve("checkpoints"), "holds no checkpoint; pass --model DIR");
        return all.get(0);
    }

    @Override
    public Integer call() {
        Path dir = model != null ? model : defaultModel();
        var options = engine.options();
        long t0 = System.nanoTime();
        try (var m = Gemma4Model.load(dir)) {
            var check = new SelfCheck(m, options);
            int[] tokens = check.defaultTokens();
            int prompt = check.defaultPromptLength();
            var results = check.runEverything(tokens, prompt);
            double secs = (System.nanoTime() - t0) / 1e9;
            boolean ok = results.stream().allMatch(SelfCheckResult::passed);
            var out = spec.commandLine().getOut();
            String how = EngineFlags.describe(options);
            String faultText = how.isEmpty() ? "none" : how;
            if (json) out.println(json(dir, faultText, tokens.length, prompt, m.config().slidingWindow(), results, ok, secs));
            else out.print(table(dir, faultText, tokens.length, prompt, m.config().slidingWindow(), results, ok, secs, Terminal.colourStdout()));
            out.flush();
            return ok ? Main.MATCH : Main.DIVERGENCE;
        }
    }

    static String table(Path dir, String faults, int tokens, int prompt, int window, List<SelfCheckResult> results, boolean ok,
                        double secs, boolean colour) {
        var st = new Terminal.Style(colour);
        var sb = new StringBuilder();
        sb.append(st.bold("decodiff selfcheck")).append('\n');
        sb.append("  model   ").append(dir).append("  (engine: ").append(faults).append(")\n");
        sb.append("  tokens  ").append(prompt).append("-token prompt + ").append(tokens - prompt).append(" greedy decode steps (sliding window ")
                .append(window).append(String.format(java.util.Locale.ROOT, "), %.2fs%n%n", secs));
        sb.append("  ").append(Fmt.pad("check", 28)).append(Fmt.pad("result", 9)).append("detail\n");
        for (var r : results) {
            sb.append("  ").append(Fmt.pad(r.check(), 28)).append(r.passed() ? st.green(Fmt.pad("✓ pass", 9)) : st.boldRed(Fmt.pad("✗ FAIL", 9)))
                    .append(r.detail()).append('\n');
        }
        sb.append('\n');
        long failed = results.stream().filter(r -> !r.passed()).count();
        if (ok) {
            sb.append(st.boldGreen("PASS")).append('\n').append(Fmt.wrap("All " + results.size()
                    + " reference-free checks agree: decode, chunked prefill and one-pass prefill compute the same numbers, probes change nothing, and each decode step processes one position.", 100, "  ")).append('\n');
        } else {
            sb.append(st.boldRed("FAIL")).append('\n');
            var failing = results.stream().filter(r -> !r.passed()).toList();
            var text = new StringBuilder(failed + " of " + results.size() + " checks fail: "
                    + String.join(", ", failing.stream().map(SelfCheckResult::check).toList()) + ".");
            var located = failing.stream().filter(r -> r.position() != null && r.point() != null).toList();
            if (!located.isEmpty()) {
                var first = located.stream().min(java.util.Comparator.comparingInt(SelfCheckResult::position)
                        .thenComparingLong(r -> dev.decodiff.engine.CapturePoints.causalRank(r.point()))).orElseThrow();
                var same = located.stream().filter(r -> r.position().equals(first.position()) && r.point().equals(first.point()))
                        .map(SelfCheckResult::check).toList();
                text.append(" First disagreement in causal order: position ").append(first.position()).append(", ").append(first.point())
                        .append(" (").append(String.join(", ", same)).append(").");
            }
            failing.stream().filter(r -> r.check().equals("cache-reads-match-writes") || r.point() == null)
                    .forEach(r -> text.append(' ').append(r.check()).append(": ").append(r.detail()).append(r.detail().endsWith(".") ? "" : "."));
            sb.append(Fmt.wrap(text.toString(), 100, "  ")).append('\n');
        }
        return sb.toString();
    }

    static String json(Path dir, String faults, int tokens, int prompt, int window, List<SelfCheckResult> results, boolean ok, double secs) {
        var o = JSON.createObjectNode();
        o.put("verdict", ok ? "pass" : "fail");
        o.put("model", dir.toString());
        o.put("faults", faults);
        o.put("tokens", tokens);
        o.put("prompt_length", prompt);
        o.put("sliding_window", window);
        var arr = o.putArray("checks");
        for (var r : results) {
            var e = arr.addObject();
            e.put("check", r.check());
            e.put("description", r.description());
            e.put("passed", r.passed());
            if (r.position() == null) e.putNull("position");
            else e.put("position", r.position());
            if (r.point() == null) e.putNull("point");
            else e.put("point", r.point());
            if (!r.passed()) {
                if (Double.isFinite(r.relL2())) e.put("value", r.relL2());
                else e.putNull("value");
                e.put("tolerance", r.tolerance());
            }
            e.put("detail", r.detail());
        }
        o.put("seconds", secs);
        try {
            return JSON.writeValueAsString(o);
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
    }
}
