package dev.decodiff.harness.plan;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * A plan as JSON ({@code decodiff plan --json}): what a producer in another language reads to write a dump decodiff
 * accepts — python/decodiff_dump.py checks every tensor against it as it is written. A shape is a list whose entries
 * are sizes, or "T" (the tokens the step fed), or "C" (the positions read: {@code read.window} and {@code read_rows}
 * give it at any step), or the name of an axis the plan does not size.
 */
public final class PlanJson {
    public static final String FORMAT = "decodiff-capture-plan";

    private PlanJson() {}

    public static ObjectNode of(CapturePlan plan) {
        var o = new ObjectMapper().createObjectNode();
        o.put("format", FORMAT);
        o.put("version", 1);
        o.put("source", plan.source());
        o.put("dump_format", "decodiff-dump v1 (docs/dump-format.md)");
        o.put("dtype", "float32");
        var m = o.putObject("model");
        m.put("model_type", plan.model().modelType());
        m.put("num_hidden_layers", plan.model().numHiddenLayers());
        m.put("config_sha256", plan.model().configSha256());
        m.put("weights_sha256", plan.model().weightsSha256());
        o.put("prompt_length", plan.promptLength());
        if (plan.tokens() != null) plan.tokens().forEach(o.putArray("tokens")::add);
        int cut = plan.points().stream().filter(PlannedPoint::isRead).mapToInt(p -> p.read().lastRows()).max().orElse(0);
        if (cut > 0) o.put("read_rows", "last:" + cut);
        else o.putNull("read_rows");
        var steps = o.putArray("steps");
        for (var st : plan.steps())
            steps.addObject().put("index", st.index()).put("start", st.start()).put("length", st.length()).put("kind", st.prefill() ? "prefill" : "decode");
        var points = o.putArray("points");
        int decode = plan.steps().size() > 1 ? 1 : -1;
        for (var p : plan.points()) {
            var j = points.addObject();
            j.put("name", p.name());
            if (p.layer() >= 0) j.put("layer", p.layer());
            else j.putNull("layer");
            j.put("kind", p.kind());
            var shape = j.putArray("shape");
            for (Dim d : p.shape()) {
                if (d.size() >= 0) shape.add(d.size());
                else shape.add(d.label());
            }
            j.put("form", p.form());
            sizes(j.putArray("prefill_shape"), plan.shapeAt(p, 0));
            if (decode > 0) sizes(j.putArray("decode_shape"), plan.shapeAt(p, decode));
            else j.putNull("decode_shape");
            j.put("required", p.required());
            j.put("what", p.what());
            if (p.isRead()) {
                var r = j.putObject("read");
                if (p.read().window() >= 0) r.put("window", p.read().window());
                else r.putNull("window");
                if (p.read().sourceLayer() >= 0) r.put("source_layer", p.read().sourceLayer());
                else r.putNull("source_layer");
                r.put("positions", ReadWords.positions(p.read()));
            }
        }
        return o;
    }

    private static void sizes(ArrayNode a, long[] shape) {
        for (long d : shape) {
            if (d >= 0) a.add(d);
            else a.addNull();
        }
    }
}
