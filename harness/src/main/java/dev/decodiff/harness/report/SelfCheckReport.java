package dev.decodiff.harness.report;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import dev.decodiff.harness.selfcheck.SelfCheckResult;

import java.nio.file.Path;
import java.util.List;

/** selfcheck's result as a terminal table with its verdict, and as JSON. */
public final class SelfCheckReport {
    private static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

    private SelfCheckReport() {}

    /** One selfcheck run: the checkpoint, how the engine was set up, the tokens it ran and every check's result. */
    public record Run(Path model, String engine, int tokens, int promptLength, int slidingWindow, List<SelfCheckResult> results,
                      double seconds) {
        public boolean passed() { return results.stream().allMatch(SelfCheckResult::passed); }
    }

    /** The terminal table and verdict. */
    /** The report, every character from the inputs escaped where it could steer a terminal ({@link Terminal#safe}). */
    public static String terminal(Run run, boolean colour) { return Terminal.safe(colour, st -> terminal(run, st)); }

    private static String terminal(Run run, Terminal.Style st) {
        var sb = new StringBuilder();
        sb.append(st.bold("decodiff selfcheck")).append('\n');
        sb.append("  model   ").append(run.model()).append("  (engine: ").append(run.engine()).append(")\n");
        sb.append("  tokens  ").append(run.promptLength()).append("-token prompt + ").append(run.tokens() - run.promptLength()).append(" greedy decode steps")
                .append(run.slidingWindow() > 0 ? " (sliding window " + run.slidingWindow() + ")" : "").append(Fmt.format(", %.2fs%n%n", run.seconds()));
        sb.append("  ").append(Fmt.pad("check", 28)).append(Fmt.pad("result", 9)).append("detail\n");
        for (var r : run.results()) {
            sb.append("  ").append(Fmt.pad(r.check(), 28)).append(r.passed() ? st.green(Fmt.pad("✓ pass", 9)) : st.boldRed(Fmt.pad("✗ FAIL", 9)))
                    .append(r.detail()).append('\n');
        }
        sb.append('\n');
        long failed = run.results().stream().filter(r -> !r.passed()).count();
        if (run.passed()) {
            boolean recurrent = run.results().stream().anyMatch(r -> r.check().startsWith("wrong-reuse-"));
            sb.append(st.boldGreen("PASS")).append('\n').append(Fmt.wrap("All " + run.results().size() + (recurrent
                    ? " reference-free checks agree: one-token steps, chunked and one-pass prefill compute the same numbers, a restored snapshot continues bit-identically, prefix reuse with the recurrent states checkpointed equals a cold run, the wrong reuse is caught at the state read, and probes change nothing."
                    : " reference-free checks agree: decode, chunked prefill and one-pass prefill compute the same numbers, probes change nothing, and each decode step processes one position."), 100, "  ")).append('\n');
        } else {
            sb.append(st.boldRed("FAIL")).append('\n');
            var failing = run.results().stream().filter(r -> !r.passed()).toList();
            var text = new StringBuilder(failed + " of " + run.results().size() + " checks fail: "
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

    /** The machine-readable result. */
    public static String json(Run run) {
        var o = JSON.createObjectNode();
        o.put("verdict", run.passed() ? "pass" : "fail");
        o.put("model", run.model().toString());
        o.put("faults", run.engine());
        o.put("tokens", run.tokens());
        o.put("prompt_length", run.promptLength());
        o.put("sliding_window", run.slidingWindow());
        var arr = o.putArray("checks");
        for (var r : run.results()) {
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
        o.put("seconds", run.seconds());
        try {
            return JSON.writeValueAsString(o);
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
    }
}
