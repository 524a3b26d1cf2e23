package dev.decodiff.harness.report;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.decodiff.harness.compare.CellStats;
import dev.decodiff.harness.compare.ComparisonResult;
import dev.decodiff.harness.compare.EngineFailure;
import dev.decodiff.harness.compare.FirstDivergence;
import dev.decodiff.harness.compare.detect.Finding;

import java.util.Locale;

/**
 * The machine-readable verdict ({@code compare --json}). Stable keys: verdict, first_divergence {step, layer, point,
 * diagnosis, variant {op, name} or null, rel_l2, tolerance, …} or null, engine_failure {step, exception, message, frames} or null, cells, observer_effect; plus tokens, steps, only_in_reference, only_in_candidate,
 * worst_by_kind, notes and the verdict paragraph. Non-finite numbers are written as null.
 */
public final class JsonReport {
    private static final ObjectMapper JSON = dev.decodiff.harness.Printable.json(new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT));

    private JsonReport() {}

    public static String render(ComparisonResult r) {
        try {
            return JSON.writeValueAsString(tree(r));
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
    }

    public static ObjectNode tree(ComparisonResult r) {
        var o = JSON.createObjectNode();
        o.put("verdict", r.verdict());
        var fd = r.firstDivergence();
        if (fd == null) o.putNull("first_divergence");
        else {
            var d = divergence(fd);
            if (fd.unaccounted() != null) d.put("unaccounted", fd.unaccounted());
            o.set("first_divergence", d);
        }
        var rd = r.referenceDisagreement();
        if (rd == null) o.putNull("reference_disagreement");
        else {
            var x = o.putObject("reference_disagreement");
            x.put("step", rd.step());
            x.put("point", rd.point());
            num(x, "rel_l2", rd.cell().relL2());
            num(x, "tolerance", rd.cell().tolerance());
            x.set("reference_local", local(rd.reference(), null));
        }
        engineFailure(o, r.engineFailure());
        o.put("cells", r.cells().size());
        o.put("failing_cells", r.failingCells());
        o.put("observer_effect", r.observerEffect());
        o.put("reference", r.reference());
        o.put("candidate", r.candidate());
        var producers = o.putObject("producers");
        producers.set("reference", JSON.valueToTree(r.referenceManifest().producer()));
        producers.set("candidate", JSON.valueToTree(r.candidateProducer()));
        var steps = o.putObject("steps");
        steps.put("compared", r.stepsCompared());
        steps.put("reference", r.referenceSteps());
        steps.put("prompt_length", r.referenceManifest().promptLength());
        var tk = o.putObject("tokens");
        for (var s : dev.decodiff.harness.compare.TokenAgreement.Status.values())
            tk.put(s.name().toLowerCase(Locale.ROOT), r.tokensWith(s));
        var per = tk.putArray("per_step");
        for (var t : r.tokens()) {
            var e = per.addObject();
            e.put("step", t.step());
            putInt(e, "reference", t.reference());
            putInt(e, "candidate", t.candidate());
            if (t.referenceMargin() == null) e.putNull("reference_margin");
            else num(e, "reference_margin", t.referenceMargin());
            e.put("status", t.status().name().toLowerCase(Locale.ROOT));
        }
        var missing = o.putObject("missing");
        var cc = r.completeness();
        missing.put("complete", cc.complete());
        missing.put("reference_steps", cc.referenceSteps());
        missing.put("candidate_steps", cc.candidateSteps());
        strings(missing.putArray("points_only_in_reference"), cc.pointsOnlyInReference());
        strings(missing.putArray("points_only_in_candidate"), cc.pointsOnlyInCandidate());
        strings(missing.putArray("excluded_by_selection"), cc.excluded());
        strings(missing.putArray("dumps"), cc.gaps());
        strings(missing.putArray("reasons"), cc.reasons());
        strings(o.putArray("only_in_reference"), r.onlyInReference());
        strings(o.putArray("only_in_candidate"), r.onlyInCandidate());
        focusStep(o.putObject("focus_step"), StepDetail.of(r));
        var wk = o.putObject("worst_by_kind");
        r.worstByKind().forEach((k, c) -> wk.set(k, cell(c)));
        attribution(o, r);
        strings(o.putArray("notes"), r.notes());
        o.put("tolerance_profile", r.profile().source());
        num(o, "near_tie", r.profile().nearTie());
        o.put("verdict_text", VerdictText.paragraph(r));
        num(o, "seconds", r.seconds());
        return o;
    }

    /** The layers × points view of the terminal and HTML reports: rel L2 per layer and point kind, and the model-level cells. */
    private static void focusStep(ObjectNode o, StepDetail d) {
        o.put("step", d.step());
        o.put("why", d.divergent() ? "first_divergence" : "closest_call");
        var layers = o.putArray("layers");
        d.layers().forEach((layer, cells) -> {
            var row = layers.addObject();
            row.put("layer", layer);
            var rel = row.putObject("rel_l2");
            for (String k : d.kinds()) {
                var c = cells.get(k);
                if (c != null) num(rel, k, c.relL2());
            }
        });
        var model = o.putObject("model_rel_l2");
        for (var c : d.before()) num(model, c.point(), c.relL2());
        for (var c : d.after()) num(model, c.point(), c.relL2());
    }

    /**
     * "attribution": null without a checkpoint; else {exact, precision_effects [{explanation, cells, first, largest}],
     * cells [{step, point, rel_l2 (accumulated), tolerance, local_rel_l2, status, explanation, leftover, from,
     * granularity, detection_floor, inside_envelope}]} for every cell attributed; the same for the reference's own ops
     * (reference_precision_effects, reference_cells); accounting (what was done, in words); detection_floor per point
     * kind (the largest floor met).
     */
    private static void attribution(ObjectNode o, ComparisonResult r) {
        var a = r.attribution();
        if (a == null) {
            o.putNull("attribution");
            return;
        }
        var at = o.putObject("attribution");
        at.put("exact", a.exact());
        var fx = at.putArray("precision_effects");
        for (var e : a.effects()) {
            var x = fx.addObject();
            x.put("explanation", e.explanation());
            x.put("cells", e.cells());
            x.set("first", local(e.first(), null));
            x.set("largest", local(e.largest(), null));
        }
        var cells = at.putArray("cells");
        for (var c : r.cells()) {
            var l = a.of(c.step(), c.point());
            if (l != null) cells.add(local(l, c));
        }
        var rfx = at.putArray("reference_precision_effects");
        for (var e : a.referenceEffects()) {
            var x = rfx.addObject();
            x.put("explanation", e.explanation());
            x.put("cells", e.cells());
            x.set("first", local(e.first(), null));
        }
        var rcells = at.putArray("reference_cells");
        for (var c : r.cells()) {
            var l = a.ofReference(c.step(), c.point());
            if (l != null) rcells.add(local(l, c));
        }
        at.put("accounting", VerdictText.accounting(r));
        var floors = at.putObject("detection_floor");
        VerdictText.floorsByKind(a).forEach((k, v) -> num(floors, k, v));
    }

    private static ObjectNode local(dev.decodiff.harness.compare.attribution.LocalError l, CellStats c) {
        var x = JSON.createObjectNode();
        x.put("step", l.step());
        x.put("point", l.point());
        if (c != null) {
            num(x, "rel_l2", c.relL2());
            num(x, "tolerance", c.tolerance());
        }
        num(x, "local_rel_l2", l.local());
        num(x, "local_tolerance", l.tolerance());
        x.put("status", l.status().name().toLowerCase(Locale.ROOT));
        if (l.explanation() == null) x.putNull("explanation");
        else x.put("explanation", l.explanation());
        num(x, "leftover", l.leftover());
        x.put("from", l.from());
        if (l.granularity() == null) x.putNull("granularity");
        else x.put("granularity", l.granularity());
        num(x, "detection_floor", l.floor());
        x.put("inside_envelope", l.envelope());
        return x;
    }

    /** "engine_failure": {step, exception, message, frames} or null (also in bisect's JSON). */
    public static void engineFailure(ObjectNode o, EngineFailure failure) {
        if (failure == null) {
            o.putNull("engine_failure");
            return;
        }
        var f = o.putObject("engine_failure");
        f.put("step", failure.step());
        f.put("exception", failure.exception());
        f.put("message", failure.message());
        strings(f.putArray("frames"), failure.frames());
    }

    private static ObjectNode divergence(FirstDivergence fd) {
        var o = JSON.createObjectNode();
        o.put("step", fd.step());
        if (fd.layer() == null) o.putNull("layer");
        else o.put("layer", fd.layer());
        o.put("point", fd.point());
        num(o, "rel_l2", fd.relL2());
        num(o, "tolerance", fd.tolerance());
        var c = fd.cell();
        if (c != null) {
            num(o, "cosine", c.cosine());
            num(o, "norm_ratio", c.normRatio());
            num(o, "reference_norm", c.refNorm());
            num(o, "candidate_norm", c.candNorm());
            num(o, "max_abs_diff", c.maxAbsDiff());
            var idx = o.putArray("max_abs_diff_index");
            for (long i : c.maxIndexND()) idx.add(i);
            o.put("non_finite", c.nonFinite());
            if (c.shapeNote() != null) o.put("shape", c.shapeNote());
        }
        o.put("kind", fd.token() != null ? "token_flip" : c != null && c.nonFinite() > 0 ? "non_finite" : "over_tolerance");
        if (fd.diagnosis() == null) o.putNull("diagnosis");
        else o.put("diagnosis", fd.diagnosis());
        variant(o, fd.variant());
        var up = o.putArray("upstream");
        for (var u : fd.upstream()) up.add(cell(u));
        return o;
    }

    /** "variant": {"op": …, "name": …}, or null when the diagnosis named no op variant. */
    public static void variant(ObjectNode o, Finding.Variant v) {
        if (v == null) { o.putNull("variant"); return; }
        var n = o.putObject("variant");
        n.put("op", v.op());
        n.put("name", v.name());
        if (!Double.isNaN(v.relL2())) {
            num(n, "rel_l2", v.relL2());
            n.put("runner_up", v.runnerUp());
            num(n, "runner_up_rel_l2", v.runnerUpRelL2());
            num(n, "margin", v.margin());
        }
    }

    private static ObjectNode cell(CellStats c) {
        var o = JSON.createObjectNode();
        o.put("step", c.step());
        o.put("point", c.point());
        num(o, "rel_l2", c.relL2());
        num(o, "tolerance", c.tolerance());
        num(o, "cosine", c.cosine());
        num(o, "norm_ratio", c.normRatio());
        num(o, "max_abs_diff", c.maxAbsDiff());
        o.put("passed", c.passed());
        return o;
    }

    private static void num(ObjectNode o, String k, double v) {
        if (Double.isFinite(v)) o.put(k, v);
        else o.putNull(k);
    }

    private static void putInt(ObjectNode o, String k, Integer v) {
        if (v == null) o.putNull(k);
        else o.put(k, v);
    }

    private static void strings(ArrayNode a, java.util.List<String> xs) { xs.forEach(a::add); }
}
