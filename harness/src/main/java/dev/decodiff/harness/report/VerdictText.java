package dev.decodiff.harness.report;

import dev.decodiff.harness.compare.CellStats;
import dev.decodiff.harness.compare.ComparisonResult;
import dev.decodiff.harness.compare.EngineFailure;
import dev.decodiff.harness.compare.FirstDivergence;
import dev.decodiff.harness.compare.TokenAgreement;
import dev.decodiff.harness.compare.detect.Finding;

import java.util.stream.Collectors;

/** The one-paragraph verdict in plain words: where, how far off, what was still clean, why, and what was not compared. */
public final class VerdictText {
    private VerdictText() {}

    public static String paragraph(ComparisonResult r) {
        var sb = new StringBuilder();
        var fd = r.firstDivergence();
        var failure = r.engineFailure();
        if (fd != null) {
            divergence(sb, r, fd);
            if (failure != null) sb.append(" Then ").append(threw(r, failure)).append('.');
        } else if (failure != null) {
            sb.append("Divergence: ").append(threw(r, failure)).append('.');
            if (!r.cells().isEmpty())
                sb.append(" Before it, all ").append(Fmt.count(r.cells().size())).append(" cells of ").append(failure.step())
                        .append(failure.step() == 1 ? " step" : " steps").append(" are within tolerance.");
        } else if (r.observerEffectFound()) {
            sb.append("Divergence caused by the probes themselves: every cell is within tolerance, but attaching the probe changed the logits (")
                    .append(r.observerEffect()).append("). The engine's capture path is not a pure observer; fix it before trusting any comparison.");
        } else if (r.referenceDisagrees()) referenceDisagrees(sb, r);
        else if (!r.complete()) incomplete(sb, r);
        else if (r.precision()) precision(sb, r);
        else match(sb, r);
        tokens(sb, r);
        if (r.observerEffect() != null && r.observerEffect().equals("none") && !r.observerEffectFound())
            sb.append(" Attaching the probes left the logits bit-identical (observer effect: none).");
        if (r.diverged() && !r.complete())
            sb.append(" Also, not everything was compared: ").append(String.join("; ", r.completeness().reasons())).append('.');
        return sb.toString();
    }

    private static void referenceDisagrees(StringBuilder sb, ComparisonResult r) {
        var d = r.referenceDisagreement();
        var l = d.reference();
        sb.append("The reference and decodiff's description of the model disagree at ").append(stepWords(r, d.step()));
        if (d.layer() != null) sb.append(", layer ").append(d.layer());
        sb.append(", ").append(d.point()).append(": the reference's own op, recomputed exactly from the reference's own recorded inputs (")
                .append(l.from()).append(")");
        if (l.granularity() != null) sb.append(" (at the granularity of ").append(l.granularity()).append(")");
        sb.append(", differs from the reference's tensor by rel L2 ").append(Fmt.sci(l.local()));
        if (l.explanation() != null && l.explanation().startsWith(dev.decodiff.harness.compare.attribution.OpAttribution.REPRODUCED_BY))
            sb.append(" (it is ").append(l.explanation()).append(", which its stated ")
                    .append(r.referenceManifest().producer() == null ? "dtype" : r.referenceManifest().producer().dtype()).append(" does not cover)");
        else if (l.explanation() != null && Double.isFinite(l.floor()))
            sb.append(", beyond what its stated precision's rounding produces there (").append(l.explanation()).append(": up to ")
                    .append(Fmt.sci(l.floor())).append(")");
        sb.append("; the cell is over tolerance (rel L2 ").append(Fmt.sci(d.cell().relL2())).append(" against ")
                .append(Fmt.sci(d.cell().tolerance())).append("). Either the reference's producer has a bug at this op, it ran other"
                        + " weights than the checkpoint's, or decodiff's ops (which its engine shares) are wrong. Nothing downstream"
                        + " of this cell can be judged against this reference: fix the reference or re-create it, or check decodiff's"
                        + " ops against transformers (decodiff selftest).");
        var c = r.attribution() == null ? null : r.attribution().of(d.step(), d.point());
        if (c != null && c.status() != null)
            sb.append(" The candidate's own op there is ").append(switch (c.status()) {
                case EXACT -> "exact on its own inputs";
                case PRECISION -> "explained by " + c.explanation();
                case UNEXPLAINED -> "not reproduced either (local " + Fmt.sci(c.local()) + ")";
                case UNATTRIBUTED -> "not measurable (" + c.from() + ")";
            }).append('.');
    }

    /** What the precision verdict rests on, in words (also in the JSON report's attribution.accounting). */
    public static String accounting(ComparisonResult r) {
        var a = r.attribution();
        if (a == null) return "none: without the checkpoint no op is recomputed";
        long failing = r.failingCells();
        return "each of the " + Fmt.count(failing) + " cells over tolerance was split exactly into what the candidate's op added"
                + " (recomputed from the candidate's own inputs), what the reference's op added (recomputed from the reference's own"
                + " inputs, held to its stated precision) and what their inputs carried from upstream cells, themselves accounted"
                + " for; " + (a.measuresEveryCell() ? "every cell of the candidate was measured" : "the candidate's cells over tolerance were measured")
                + ", and a cell over tolerance with no named effect at or before it is never precision";
    }

    /** The largest detection floor met per point kind, where a cell was judged against an envelope. */
    public static java.util.Map<String, Double> floorsByKind(dev.decodiff.harness.compare.attribution.Attributed a) {
        var m = new java.util.TreeMap<String, Double>();
        for (var e : a.cells().values())
            if (Double.isFinite(e.floor())) m.merge(dev.decodiff.engine.CapturePoints.kindOf(e.point()), e.floor(), Math::max);
        return m;
    }

    private static void incomplete(StringBuilder sb, ComparisonResult r) {
        sb.append("Incomplete: the ").append(Fmt.count(r.cells().size())).append(" cells compared over ").append(r.stepsCompared())
                .append(r.stepsCompared() == 1 ? " step" : " steps").append(" are within tolerance, but not every expected cell was compared: ")
                .append(String.join("; ", r.completeness().reasons()))
                .append(". This is not a match: give the candidate every step and point the reference holds (re-create a dump that"
                        + " was cut short; a finished one without its mark gets it from validate --mark-complete), or leave points out"
                        + " explicitly with dump --points.");
    }

    /** "the engine threw at step 1 (decode, position 23): IllegalStateException: … (at …)". */
    private static String threw(ComparisonResult r, EngineFailure f) {
        return "the engine threw at " + stepWords(r, f.step()) + ": " + f.what()
                + (f.frames().isEmpty() ? "" : " (at " + String.join(" ← ", f.frames().subList(0, Math.min(2, f.frames().size()))) + ")");
    }

    private static String stepWords(ComparisonResult r, int step) {
        if (step == 0) return "step 0 (the prefill of " + r.referenceManifest().promptLength() + " tokens)";
        var st = r.referenceManifest().step(step);
        return "step " + step + " (decode, position " + st.start() + ")";
    }

    private static void divergence(StringBuilder sb, ComparisonResult r, FirstDivergence fd) {
        CellStats c = fd.cell();
        sb.append("Divergence at ").append(stepWords(r, fd.step()));
        if (fd.layer() != null) sb.append(", layer ").append(fd.layer());
        if (c != null) {
            sb.append(", ").append(fd.point()).append(": ");
            if (c.nonFinite() > 0) sb.append(c.nonFinite()).append(" NaN/Inf values");
            else if (c.shapeNote() != null) sb.append(c.shapeNote());
            else sb.append("rel L2 ").append(Fmt.sci(c.relL2())).append(" against a tolerance of ").append(Fmt.sci(c.tolerance()))
                    .append(" (cosine ").append(Fmt.num(c.cosine(), 4)).append(", norms ").append(Fmt.num(c.candNorm(), 2))
                    .append(" vs ").append(Fmt.num(c.refNorm(), 2)).append(")");
            sb.append('.');
        } else {
            sb.append(": the greedy token flips although every compared cell is within tolerance.");
        }
        if (!fd.upstream().isEmpty()) {
            double maxShare = fd.upstream().stream().mapToDouble(CellStats::usage).max().orElse(0);
            sb.append(maxShare <= 1 ? " Just upstream it is clean: " : " Just upstream: ");
            sb.append(fd.upstream().stream().map(u -> u.point() + " " + Fmt.rel(u.relL2())).collect(Collectors.joining(", ")));
            sb.append(maxShare < 1e-3 ? " (each under 0.1% of its tolerance)." : " (at most " + Fmt.percent(maxShare) + " of tolerance).");
        } else if (c != null && fd.step() == 0) {
            sb.append(" It is the first point recorded in the step.");
        }
        if (fd.diagnosis() != null) {
            String d = fd.diagnosis();
            sb.append(" Diagnosis: ").append(d).append(d.endsWith(".") ? "" : ".");
        }
        if (fd.variant() != null) sb.append(" Variant: ").append(variant(fd.variant())).append('.');
        if (fd.unaccounted() != null) sb.append(" Not accounted for: the cell is ").append(fd.unaccounted()).append('.');
        local(sb, r, fd);
        long failing = r.failingCells();
        if (failing > 1) sb.append(" From there ").append(Fmt.count(failing)).append(" of ").append(Fmt.count(r.cells().size()))
                .append(" cells are over tolerance.");
    }

    private static void precision(StringBuilder sb, ComparisonResult r) {
        var a = r.attribution();
        long failing = r.failingCells();
        sb.append("Precision: ");
        if (failing > 0)
            sb.append(Fmt.count(failing)).append(" of ").append(Fmt.count(r.cells().size())).append(" cells are over tolerance, but no op is wrong:");
        else sb.append("every cell is within tolerance, and the candidate's ops differ from exact fp32 only by its own rounding:");
        sb.append(" each op, recomputed exactly from the candidate's own inputs with the checkpoint's weights, is either exact"
                + " (it only inherits drift from upstream) or a named precision effect — ");
        sb.append(effects(a));
        if (!a.referenceEffects().isEmpty()) sb.append("; on the reference's side, its own rounding — ").append(effects(a.referenceEffects()));
        sb.append(" — and the reference's own ops, recomputed from its own inputs, agree with decodiff's description of the model.");
        var inside = a.insideEnvelope();
        if (!inside.isEmpty()) {
            var floors = floorsByKind(a);
            sb.append(" ").append(Fmt.count(inside.size())).append(inside.size() == 1 ? " cell is" : " cells are")
                    .append(" precision because its local error lies inside its class's rounding envelope, not because a hypothesis"
                            + " reproduced it: a bug smaller than the detection floor there would look the same (largest floor per op: ")
                    .append(floors.entrySet().stream().map(e -> e.getKey() + " " + Fmt.sci(e.getValue())).collect(Collectors.joining(", ")))
                    .append(").");
        }
        sb.append(" No divergence").append(a.exact() ? "; --exact makes precision effects fail (exit 1)." : " (pass --exact to fail on precision effects too).");
    }

    /** "GELU through an fp16 table (126 cells, first layers.0.mlp.out at step 0: local 2.6e-4, reproduced to 3.1e-7)". */
    static String effects(dev.decodiff.harness.compare.attribution.Attributed a) { return effects(a.effects()); }

    static String effects(java.util.List<dev.decodiff.harness.compare.attribution.Attributed.Effect> list) {
        if (list.isEmpty()) return "none named";
        return list.stream().map(e -> e.explanation() + " (" + Fmt.count(e.cells()) + (e.cells() == 1 ? " cell" : " cells")
                + ", first " + e.first().point() + " at step " + e.first().step() + ": local " + Fmt.sci(e.first().local())
                + (e.first().envelope() ? ", inside its envelope (floor " + Fmt.sci(e.first().floor()) + ")"
                : ", reproduced to " + Fmt.sci(e.first().leftover())) + ")").collect(Collectors.joining("; "));
    }

    /** With attribution: what the divergent cell's own op added, and the precision effects before it. */
    private static void local(StringBuilder sb, ComparisonResult r, FirstDivergence fd) {
        var a = r.attribution();
        if (a == null || fd.cell() == null) return;
        var l = a.of(fd.step(), fd.point());
        if (l == null) return;
        switch (l.status()) {
            case UNEXPLAINED -> {
                if (l.explanation() != null && l.explanation().startsWith(dev.decodiff.harness.compare.attribution.OpAttribution.STATE_KEPT_IN)) {
                    // a named bug class, not a near miss of precision
                    sb.append(" Its own op adds rel L2 ").append(Fmt.sci(l.local())).append(" (recomputed exactly from the candidate's ").append(l.from())
                            .append("), and that is the bug: ").append(l.explanation()).append(" — reproduced to ").append(Fmt.sci(l.leftover()))
                            .append("; this op is the divergence, not drift from upstream.");
                    break;
                }
                sb.append(" Its own op adds rel L2 ").append(Fmt.sci(l.local())).append(" (recomputed exactly from the candidate's ").append(l.from());
                if (l.granularity() != null) sb.append("; at the granularity of ").append(l.granularity());
                sb.append("), and no precision effect reproduces it");
                int v = l.explanation() == null ? -1 : l.explanation().indexOf("; the leftover is the known variant");
                if (v >= 0)
                    sb.append(": what the closest, ").append(l.explanation(), 0, v).append(", leaves (").append(Fmt.sci(l.leftover()))
                            .append(", inside that class's rounding, whose detection floor here is ").append(Fmt.sci(l.floor()))
                            .append(") is not rounding —").append(l.explanation().substring(v + 1).replaceFirst("^ the leftover", " it"));
                else if (l.explanation() != null && Double.isFinite(l.floor()))
                    sb.append(" or lies within its rounding (the closest, ").append(l.explanation()).append(", produces at most ")
                            .append(Fmt.sci(l.floor())).append(" here: the detection floor)");
                else if (l.explanation() != null && Double.isFinite(l.leftover()))
                    sb.append(" (the closest, ").append(l.explanation()).append(", leaves ").append(Fmt.sci(l.leftover())).append(")");
                sb.append(": this op is the divergence, not drift from upstream.");
            }
            case UNATTRIBUTED -> sb.append(" Its own contribution could not be measured (").append(l.from()).append("), so it counts as a divergence.");
            default -> {}
        }
        if (a.hasEffects()) sb.append(" Precision effects named besides: ").append(effects(a)).append('.');
    }

    private static void match(StringBuilder sb, ComparisonResult r) {
        sb.append("Match: all ").append(Fmt.count(r.cells().size())).append(" cells over ").append(r.stepsCompared())
                .append(r.stepsCompared() == 1 ? " step" : " steps");
        int decode = r.stepsCompared() - 1;
        sb.append(" (a prefill of ").append(r.referenceManifest().promptLength()).append(" tokens")
                .append(decode > 0 ? " and " + decode + " decode step" + (decode == 1 ? "" : "s") : "").append(")");
        sb.append(" are within tolerance.");
        var w = r.worstCell();
        if (w != null)
            sb.append(" The closest call is ").append(w.point()).append(" at step ").append(w.step()).append(": rel L2 ")
                    .append(Fmt.sci(w.relL2())).append(" against ").append(Fmt.sci(w.tolerance())).append(" (")
                    .append(Fmt.percent(w.usage())).append(" of its tolerance).");
        var a = r.attribution();
        if (a != null && a.hasEffects())
            sb.append(" Its ops differ from exact fp32 by its own rounding, inside every tolerance: ").append(effects(a)).append('.');
    }

    private static void tokens(StringBuilder sb, ComparisonResult r) {
        long known = r.tokens().stream().filter(t -> t.status() != TokenAgreement.Status.UNKNOWN).count();
        if (known == 0) return;
        long agree = r.tokensWith(TokenAgreement.Status.AGREE);
        long near = r.tokensWith(TokenAgreement.Status.NEAR_TIE);
        long flip = r.tokensWith(TokenAgreement.Status.FLIP);
        sb.append(" Greedy tokens agree at ").append(agree).append(" of ").append(known).append(" steps");
        if (near > 0) {
            var first = r.tokens().stream().filter(t -> t.status() == TokenAgreement.Status.NEAR_TIE).findFirst().orElseThrow();
            sb.append(", ").append(near).append(near == 1 ? " near-tie" : " near-ties").append(" (step ").append(first.step())
                    .append(": the reference's top-2 margin is ").append(Fmt.sci(first.referenceMargin())).append(")");
        }
        if (flip > 0) {
            var first = r.tokens().stream().filter(TokenAgreement::failed).findFirst().orElseThrow();
            sb.append(", ").append(flip).append(flip == 1 ? " flip" : " flips").append(" (first at step ").append(first.step())
                    .append(": ").append(first.candidate()).append(" instead of ").append(first.reference()).append(")");
        }
        sb.append('.');
    }

    /** "attention — the scores scaled by 1/√d". */
    public static String variant(Finding.Variant v) { return v.op() + " — " + v.name(); }
}
