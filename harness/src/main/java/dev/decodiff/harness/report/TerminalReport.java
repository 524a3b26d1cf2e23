package dev.decodiff.harness.report;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.harness.compare.CellStats;
import dev.decodiff.harness.compare.ComparisonResult;
import dev.decodiff.harness.compare.TokenAgreement;
import dev.decodiff.harness.dump.DumpManifest;

import java.util.ArrayList;
import java.util.List;

/**
 * The terminal report: a header, a layers × points table of the first divergent step (or of the step with the
 * closest call when everything matches), a step × layer summary of the worst rel L2, then the verdict paragraph.
 */
public final class TerminalReport {
    private static final int W = 8, WD = 9;
    private static final int MAX_SUMMARY_ROWS = 48;

    private TerminalReport() {}

    /** The report, every character from the inputs (names, paths, producer strings) escaped where it could steer a terminal. */
    public static String render(ComparisonResult r, boolean colour) { return Terminal.safe(colour, st -> render(r, st)); }

    private static String render(ComparisonResult r, Terminal.Style st) {
        var sb = new StringBuilder();
        header(sb, r, st);
        var fd = r.firstDivergence();
        var focus = StepDetail.of(r);
        detail(sb, focus, st);
        local(sb, r, focus, st);
        summary(sb, r, st);
        engineFailure(sb, r, st);
        if (!r.onlyInReference().isEmpty())
            sb.append(st.dim("only in the reference (not compared): " + abbreviate(r.onlyInReference()))).append('\n');
        if (!r.onlyInCandidate().isEmpty())
            sb.append(st.dim("only in the candidate (not compared, not needed: the reference does not hold them): " + abbreviate(r.onlyInCandidate()))).append('\n');
        for (String n : r.notes()) sb.append(st.yellow(Fmt.wrap("note: " + n, 100, "").replace("\n", "\n      "))).append('\n');
        sb.append('\n');
        for (String m : r.completeness().reasons()) sb.append(st.yellow(Fmt.wrap("missing: " + m, 100, "").replace("\n", "\n      "))).append('\n');
        String verdict = r.matches() ? st.boldGreen("MATCH") : r.referenceDisagrees() ? st.boldRed("REFERENCE DISAGREES")
                : r.incomplete() ? st.yellow("INCOMPLETE")
                : r.precision() ? (r.exitCode() == 0 ? st.boldGreen("PRECISION") : st.boldRed("PRECISION (--exact)")) : st.boldRed("DIVERGENCE");
        sb.append(verdict).append('\n');
        sb.append(Fmt.wrap(VerdictText.paragraph(r), 100, "  ")).append('\n');
        return sb.toString();
    }

    private static void header(StringBuilder sb, ComparisonResult r, Terminal.Style st) {
        DumpManifest m = r.referenceManifest();
        sb.append(st.bold("decodiff compare")).append('\n');
        var p = m.producer();
        String prod = "  (" + String.join(", ", nonNull(p == null ? null : p.describe(), m.model().modelType(), m.model().numHiddenLayers() + " layers")) + ")";
        sb.append("  reference  ").append(r.reference()).append(prod).append('\n');
        var cp = r.candidateProducer();
        sb.append("  candidate  ").append(r.candidate()).append('\n');
        if (cp != null && !cp.describe().isEmpty()) sb.append("             ").append(st.dim("by " + cp.describe())).append('\n');
        var rq = p == null ? null : p.quantization();
        var cq = cp == null ? null : cp.quantization();
        if (rq != null || cq != null) {
            String rw = p != null && p.statesQuantization() ? DumpManifest.weights(rq) : "not stated";
            String cw = cp != null && cp.statesQuantization() ? DumpManifest.weights(cq) : "not stated";
            sb.append("  weights    ").append(rw.equals(cw) ? rw + " on both sides" : "reference " + rw + "; candidate " + cw).append('\n');
        }
        int decode = m.stepCount() - 1;
        sb.append("  ").append(r.stepsCompared()).append(" of ").append(m.stepCount()).append(" steps (prompt ")
                .append(m.promptLength()).append(" tokens + ").append(decode).append(" decode), ")
                .append(Fmt.count(r.cells().size())).append(" cells, tolerances: ").append(r.profile().source())
                .append(Fmt.format(", %.2fs", r.seconds())).append('\n');
        String obs = r.observerEffect();
        if (obs != null && !obs.equals(ComparisonResult.NOT_APPLICABLE))
            sb.append("  observer effect: ").append(r.observerEffectFound() ? st.red(obs) : obs).append('\n');
        sb.append('\n');
    }

    private static List<String> nonNull(String... xs) {
        var l = new ArrayList<String>();
        for (String x : xs) if (x != null && !x.isBlank()) l.add(x);
        return l;
    }

    private static String cellText(CellStats c, Terminal.Style st, boolean mark) { return cellText(c, st, mark, W); }

    private static String cellText(CellStats c, Terminal.Style st, boolean mark, int W) {
        if (c == null) return Fmt.padLeft("·", W - 1) + " ";
        String v = StepDetail.value(c);
        String suffix = c.failed() ? "✗" : " ";
        String text = Fmt.padLeft(v, W - 1) + suffix;
        if (c.failed()) return mark ? st.boldRed(text) : st.red(text);
        if (c.usage() > 0.5) return st.yellow(text);
        return text;
    }

    private static void detail(StringBuilder sb, StepDetail d, Terminal.Style st) {
        if (d.isEmpty()) return;
        sb.append(st.bold(d.title() + " — rel L2 per layer × point (✗ over tolerance)")).append('\n');
        if (!d.before().isEmpty()) sb.append(modelLine(d.before(), st, d)).append('\n');
        layersTable(sb, d, c -> cellText(c, st, d.isFirst(c), WD));
        if (!d.after().isEmpty()) sb.append(modelLine(d.after(), st, d)).append('\n');
        sb.append('\n');
    }

    /** The focus step's layers × point kinds, one text per cell (null where the step has no such cell). */
    private static void layersTable(StringBuilder sb, StepDetail d, java.util.function.Function<CellStats, String> text) {
        if (d.kinds().isEmpty()) return;
        sb.append(Fmt.pad("layer", 6));
        for (String k : d.kinds()) sb.append(Fmt.padLeft(shortKind(k), WD - 1)).append(' ');
        sb.append('\n');
        for (var e : d.layers().entrySet()) {
            sb.append(Fmt.padLeft(Integer.toString(e.getKey()), 5)).append(' ');
            for (String k : d.kinds()) sb.append(text.apply(e.getValue().get(k)));
            sb.append('\n');
        }
    }

    /**
     * The focus step's local errors: what each op added, recomputed from the candidate's own inputs; "~" a named
     * precision effect, "✗" unexplained, "?" not measurable (inputs missing), blank for an op exact to fp32 noise.
     */
    private static void local(StringBuilder sb, ComparisonResult r, StepDetail d, Terminal.Style st) {
        var a = r.attribution();
        if (a == null || d.isEmpty()) return;
        boolean any = false;
        for (var row : d.layers().values()) for (var c : row.values()) any |= a.of(c.step(), c.point()) != null;
        for (var c : d.before()) any |= a.of(c.step(), c.point()) != null;
        for (var c : d.after()) any |= a.of(c.step(), c.point()) != null;
        if (!any) return;
        sb.append(st.bold("Local error at step " + d.step() + " — what each op added on the candidate's own inputs (~ precision, ✗ unexplained, ? not measurable)"))
                .append('\n');
        if (!d.before().isEmpty()) sb.append(localLine(d.before(), a, st)).append('\n');
        layersTable(sb, d, c -> localText(c == null ? null : a.of(c.step(), c.point()), st, WD));
        if (!d.after().isEmpty()) sb.append(localLine(d.after(), a, st)).append('\n');
        for (var e : a.effects())
            sb.append(st.dim(Fmt.wrap("~ " + e.explanation() + ": " + Fmt.count(e.cells()) + (e.cells() == 1 ? " cell" : " cells") + ", first "
                    + e.first().point() + " at step " + e.first().step() + " (local " + Fmt.sci(e.first().local()) + ", reproduced to "
                    + Fmt.sci(e.first().leftover()) + ")", 100, "").replace("\n", "\n    "))).append('\n');
        sb.append('\n');
    }

    private static String localLine(List<CellStats> cs, dev.decodiff.harness.compare.attribution.Attributed a, Terminal.Style st) {
        var sb = new StringBuilder("     ");
        for (var c : cs) sb.append(' ').append(c.point()).append(' ').append(localText(a.of(c.step(), c.point()), st, W).stripLeading());
        return sb.toString();
    }

    private static String localText(dev.decodiff.harness.compare.attribution.LocalError l, Terminal.Style st, int W) {
        if (l == null) return Fmt.padLeft("·", W - 1) + " ";
        return switch (l.status()) {
            case EXACT -> Fmt.padLeft(Fmt.rel(l.local()), W - 1) + " ";
            case PRECISION -> st.yellow(Fmt.padLeft(Fmt.rel(l.local()), W - 1) + "~");
            case UNEXPLAINED -> st.boldRed(Fmt.padLeft(Fmt.rel(l.local()), W - 1) + "✗");
            case UNATTRIBUTED -> st.yellow(Fmt.padLeft("?", W - 1) + " ");
        };
    }

    private static String modelLine(List<CellStats> cs, Terminal.Style st, StepDetail d) {
        var sb = new StringBuilder("     ");
        for (var c : cs) sb.append(' ').append(c.point()).append(' ').append(cellText(c, st, d.isFirst(c)).stripLeading());
        return sb.toString();
    }

    static String shortKind(String k) { return k.startsWith("attn.") && !k.equals(CapturePoints.ATTN_OUT) ? k.substring(5) : k; }

    private static void summary(StringBuilder sb, ComparisonResult r, Terminal.Style st) {
        var g = new StepLayerGrid(r);
        var cols = g.usedColumns();
        sb.append(st.bold("Worst rel L2 per step × layer (its worst point; ✗ over tolerance)")).append('\n');
        sb.append(Fmt.pad("step", 5));
        for (int col : cols) sb.append(Fmt.padLeft(g.columnName(col), W - 1)).append(' ');
        sb.append(" token").append('\n');
        var rows = new ArrayList<Integer>();
        for (int s = 0; s < g.steps; s++) rows.add(s);
        if (rows.size() > MAX_SUMMARY_ROWS) {
            int fdStep = r.firstDivergence() != null ? r.firstDivergence().step() : -1;
            var keep = new java.util.TreeSet<Integer>();
            for (int s = 0; s < 24; s++) keep.add(s);
            for (int s = g.steps - 16; s < g.steps; s++) keep.add(s);
            if (fdStep >= 0) for (int s = Math.max(0, fdStep - 2); s <= Math.min(g.steps - 1, fdStep + 2); s++) keep.add(s);
            rows = new ArrayList<>(keep);
        }
        int prev = -1;
        for (int s : rows) {
            if (prev >= 0 && s != prev + 1) sb.append(st.dim("  …")).append('\n');
            prev = s;
            sb.append(Fmt.padLeft(Integer.toString(s), 4)).append(' ');
            for (int col : cols) sb.append(cellText(g.worst[s][col], st, false));
            TokenAgreement t = s < r.tokens().size() ? r.tokens().get(s) : null;
            sb.append(' ').append(tokenText(t, st)).append('\n');
        }
        sb.append('\n');
    }

    private static void engineFailure(StringBuilder sb, ComparisonResult r, Terminal.Style st) {
        var f = r.engineFailure();
        if (f == null) return;
        sb.append(st.bold("The engine threw at step " + f.step())).append('\n');
        sb.append("  ").append(st.red(f.what())).append('\n');
        for (String frame : f.frames()) sb.append(st.dim("    at " + frame)).append('\n');
        sb.append('\n');
    }

    private static String tokenText(TokenAgreement t, Terminal.Style st) {
        if (t == null) return "";
        return switch (t.status()) {
            case AGREE -> st.green("= " + t.reference());
            case NEAR_TIE -> st.yellow(t.candidate() + "≠" + t.reference() + " near-tie");
            case FLIP -> st.red(t.candidate() + "≠" + t.reference() + " flip");
            case UNKNOWN -> st.dim("?");
        };
    }

    private static String abbreviate(List<String> pts) {
        if (pts.size() <= 8) return String.join(", ", pts);
        return String.join(", ", pts.subList(0, 8)) + ", … (" + pts.size() + " in all)";
    }
}
