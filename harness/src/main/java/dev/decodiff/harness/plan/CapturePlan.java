package dev.decodiff.harness.plan;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.LayerSpec;
import dev.decodiff.engine.LayerType;
import dev.decodiff.harness.dump.DumpManifest;
import dev.decodiff.harness.dump.DumpReader;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The capture plan: every point a producer records, in causal order, with its shape at each step, what the read-back
 * points hold and which points local attribution needs. One object answers all three questions that must never
 * disagree — what {@code decodiff plan} prints, what {@code validate} accepts and what {@code compare} refuses as a
 * broken dump — so a shape rule lives here and nowhere else.
 *
 * <p>Made from a checkpoint (every size known, only the points the model has), from a reference dump (its points,
 * sized as it holds them) or from a manifest alone (the format's rules: ranks and the first axis, other sizes free).
 */
public final class CapturePlan {
    /** One forward call: it fed positions [start, start + length). */
    public record Step(int index, int start, int length) {
        public long lastPosition() { return start + length - 1L; }

        public boolean prefill() { return index == 0; }
    }

    /** Where the plan came from, in words ("checkpoint checkpoints/gemma4-tiny", "reference …", "manifest …"). */
    private final String source;
    private final DumpManifest.Model model;
    private final List<Step> steps;
    private final Map<String, PlannedPoint> points;
    private final PlanGeometry config;
    private final List<Integer> tokens;
    private final int promptLength;
    private final boolean generic;

    private CapturePlan(String source, DumpManifest.Model model, List<Step> steps, List<PlannedPoint> points, PlanGeometry config,
                        List<Integer> tokens, int promptLength, boolean generic) {
        this.source = source;
        this.model = model;
        this.steps = List.copyOf(steps);
        var byName = new LinkedHashMap<String, PlannedPoint>();
        points.stream().sorted(java.util.Comparator.comparingLong(p -> CapturePoints.causalRank(p.name()))).forEach(p -> byName.put(p.name(), p));
        this.points = byName;
        this.config = config;
        this.tokens = tokens;
        this.promptLength = promptLength;
        this.generic = generic;
    }

    // ---- making one ---------------------------------------------------------------------------------------------

    /** The format's rules for a dump with this manifest: every contract name of its layers, sizes free. */
    public static CapturePlan forManifest(DumpManifest m) {
        var pts = new ArrayList<PlannedPoint>();
        int L = m.model().numHiddenLayers();
        pts.add(point(CapturePoints.EMBED, -1, List.of(ROWS, free("hidden")), null, null));
        pts.add(point(CapturePoints.PLE, -1, List.of(ROWS, fixed("num_hidden_layers", L), free("P")), null, null));
        var unknownRead = new ReadBack(-1, -1, 0);
        for (int i = 0; i < L; i++)
            for (String kind : CapturePoints.LAYER_SUFFIXES)
                pts.add(point(CapturePoints.layer(i, kind), i, genericShape(kind), CapturePoints.isCacheRead(kind) ? unknownRead : null, null));
        pts.add(point(CapturePoints.FINAL_NORM, -1, List.of(ROWS, free("hidden")), null, null));
        pts.add(point(CapturePoints.LOGITS, -1, List.of(free("vocab")), null, null));
        var steps = m.steps().stream().map(s -> new Step(s.index(), s.start(), s.length())).toList();
        return new CapturePlan("manifest", m.model(), steps, pts, null, m.tokens(), m.promptLength(), true);
    }

    /**
     * A checkpoint's plan for a prompt of {@code promptLength} tokens and {@code decodeSteps} decode steps: step 0
     * prefills the prompt, every later step feeds one token.
     */
    public static CapturePlan forCheckpoint(String source, PlanGeometry cfg, DumpManifest.Model model, int promptLength, int decodeSteps, int readRows) {
        var steps = new ArrayList<Step>();
        steps.add(new Step(0, 0, promptLength));
        for (int s = 1; s <= decodeSteps; s++) steps.add(new Step(s, promptLength + s - 1, 1));
        return new CapturePlan(source, model, steps, modelPoints(cfg, readRows), cfg, null, promptLength, false);
    }

    /**
     * A reference's plan: what a candidate records to be compared with it — the reference's own points (every one of
     * them, for a match), its steps and tokens, each point sized as the reference holds it. The checkpoint, where it
     * is at hand, adds what the reads hold (windows, KV sharing); without it the windows are read off the reference.
     */
    public static CapturePlan forReference(DumpReader ref, PlanGeometry cfg) {
        var m = ref.manifest();
        int cut = ref.readRows() == null ? 0 : ref.readRows().last();
        var fromModel = new LinkedHashMap<String, PlannedPoint>();
        if (cfg != null) modelPoints(cfg, cut).forEach(p -> fromModel.put(p.name(), p));
        var generic = forManifest(m);
        var pts = new ArrayList<PlannedPoint>();
        for (String name : ref.allPoints()) {
            PlannedPoint g = fromModel.getOrDefault(name, generic.points.get(name));
            if (g == null) continue; // outside the contract: compare lists it, never compares it
            long[] held = null; // the first step that holds it (a state read is absent on the first step)
            for (int st = 0; st < ref.stepCount() && held == null; st++) held = ref.shape(st, name);
            var dims = new ArrayList<Dim>();
            for (int a = 0; a < g.shape().size(); a++) {
                Dim d = g.shape().get(a);
                dims.add(d instanceof Dim.Rows || d instanceof Dim.Read || held == null || a >= held.length ? d : fixed(d.label(), held[a]));
            }
            ReadBack read = g.read();
            if (read != null && read.window() < 0) read = new ReadBack(observedWindow(ref, name), -1, cut);
            pts.add(new PlannedPoint(name, g.layer(), g.kind(), List.copyOf(dims), g.required(), g.what(), read));
        }
        var steps = m.steps().stream().map(s -> new Step(s.index(), s.start(), s.length())).toList();
        return new CapturePlan("reference " + ref.dir(), m.model(), steps, pts, cfg, m.tokens(), m.promptLength(), false);
    }

    /** The window a reference's reads show: the first read shorter than its step's positions fixes W; none: full (0). */
    private static int observedWindow(DumpReader ref, String point) {
        for (int s = 0; s < ref.stepCount(); s++) {
            long[] shape = ref.shape(s, point);
            if (shape != null && shape.length == 3 && shape[0] < ref.manifest().step(s).end()) return (int) shape[0];
        }
        return 0;
    }

    /** Every point the model has, sized. */
    private static List<PlannedPoint> modelPoints(PlanGeometry cfg, int readRows) {
        var pts = new ArrayList<PlannedPoint>();
        Dim hidden = fixed("hidden", cfg.hidden());
        pts.add(point(CapturePoints.EMBED, -1, List.of(ROWS, hidden), null, null));
        if (cfg.hasPle()) pts.add(point(CapturePoints.PLE, -1, List.of(ROWS, fixed("num_hidden_layers", cfg.numLayers()), fixed("P", cfg.pleDim())), null, null));
        for (var spec : cfg.layers()) {
            int i = spec.index();
            Dim heads = fixed("heads", cfg.numHeads()), kvHeads = fixed("kv_heads", spec.kvHeads()), d = fixed("head_dim", spec.headDim());
            var read = new ReadBack(spec.type() == LayerType.SLIDING ? cfg.slidingWindow() : 0, spec.kvSource(), readRows);
            pts.add(point(CapturePoints.layer(i, CapturePoints.Q), i, List.of(ROWS, heads, d), null, spec));
            if (!spec.kvShared()) {
                pts.add(point(CapturePoints.layer(i, CapturePoints.K), i, List.of(ROWS, kvHeads, d), null, spec));
                pts.add(point(CapturePoints.layer(i, CapturePoints.V), i, List.of(ROWS, kvHeads, d), null, spec));
            }
            pts.add(point(CapturePoints.layer(i, CapturePoints.K_READ), i, List.of(READ, kvHeads, d), read, spec));
            pts.add(point(CapturePoints.layer(i, CapturePoints.V_READ), i, List.of(READ, kvHeads, d), read, spec));
            pts.add(point(CapturePoints.layer(i, CapturePoints.ATTN_OUT), i, List.of(ROWS, fixed("heads·head_dim", (long) cfg.numHeads() * spec.headDim())), null, spec));
            pts.add(point(CapturePoints.layer(i, CapturePoints.MLP_OUT), i, List.of(ROWS, hidden), null, spec));
            if (cfg.moe()) pts.add(point(CapturePoints.layer(i, CapturePoints.MOE_OUT), i, List.of(ROWS, hidden), null, spec));
            pts.add(point(CapturePoints.layer(i, CapturePoints.OUT), i, List.of(ROWS, hidden), null, spec));
        }
        pts.add(point(CapturePoints.FINAL_NORM, -1, List.of(ROWS, hidden), null, null));
        pts.add(point(CapturePoints.LOGITS, -1, List.of(fixed("vocab", cfg.vocabSize())), null, null));
        return pts;
    }

    private static final Dim ROWS = new Dim.Rows(), READ = new Dim.Read();

    private static Dim fixed(String label, long size) { return new Dim.Fixed(label, size); }

    private static Dim free(String label) { return new Dim.Free(label); }

    private static List<Dim> genericShape(String kind) {
        return switch (kind) {
            case CapturePoints.Q -> List.of(ROWS, free("heads"), free("head_dim"));
            case CapturePoints.K, CapturePoints.V -> List.of(ROWS, free("kv_heads"), free("head_dim"));
            case CapturePoints.K_READ, CapturePoints.V_READ -> List.of(READ, free("kv_heads"), free("head_dim"));
            case CapturePoints.ATTN_OUT -> List.of(ROWS, free("heads·head_dim"));
            case CapturePoints.ATTN_GATE -> List.of(ROWS, free("heads·head_dim"));
            case CapturePoints.LINEAR_Q, CapturePoints.LINEAR_K -> List.of(ROWS, free("heads"), free("dk"));
            case CapturePoints.LINEAR_V, CapturePoints.LINEAR_CORE_OUT -> List.of(ROWS, free("heads"), free("dv"));
            case CapturePoints.LINEAR_BETA, CapturePoints.LINEAR_DECAY -> List.of(ROWS, free("heads"));
            // states are read at a step's start and written at its end: not per token
            case CapturePoints.LINEAR_CONV_STATE_READ, CapturePoints.LINEAR_CONV_STATE -> List.of(free("K−1"), free("channels"));
            case CapturePoints.LINEAR_STATE_READ, CapturePoints.LINEAR_STATE -> List.of(free("heads"), free("dk"), free("dv"));
            default -> List.of(ROWS, free("hidden"));
        };
    }

    private static PlannedPoint point(String name, int layer, List<Dim> shape, ReadBack read, LayerSpec spec) {
        String kind = CapturePoints.kindOf(name);
        boolean required = layer < 0 || kind.equals(CapturePoints.OUT);
        return new PlannedPoint(name, layer, kind, shape, required, PointWords.what(kind, spec), read);
    }

    // ---- reading one --------------------------------------------------------------------------------------------

    public String source() { return source; }

    public DumpManifest.Model model() { return model; }

    public List<Step> steps() { return steps; }

    public Step step(int s) { return steps.get(s); }

    /** Every point, in causal order. */
    public List<PlannedPoint> points() { return List.copyOf(points.values()); }

    /** The point of that name, or null when it is not a contract name the plan holds. */
    public PlannedPoint point(String name) { return points.get(name); }

    /** The checkpoint's geometry, or null when the plan was made without one. */
    public PlanGeometry config() { return config; }

    /** The tokens the steps feed (a reference's, or a manifest's), or null for a checkpoint's plan. */
    public List<Integer> tokens() { return tokens; }

    public int promptLength() { return promptLength; }

    /** Whether the sizes of the model's axes are unknown (a plan made from a manifest alone). */
    public boolean generic() { return generic; }

    /** The shape a point has at step s; -1 for an axis the plan does not know. */
    public long[] shapeAt(PlannedPoint p, int s) {
        var st = steps.get(s);
        long[] out = new long[p.shape().size()];
        for (int a = 0; a < out.length; a++) {
            Dim d = p.shape().get(a);
            out[a] = switch (d) {
                case Dim.Rows r -> st.length();
                case Dim.Read r -> p.read() != null && p.read().window() >= 0 ? p.read().rows(st.lastPosition()) : -1;
                default -> d.size();
            };
        }
        return out;
    }

    /**
     * Why a tensor held under a contract name breaks the plan at step s, or null when it holds (and for names outside
     * the contract, which are not checked). {@code candidate}: a comparison's candidate, whose read of another length
     * is a divergence against the reference's read, not bad input.
     */
    public String shapeProblem(String name, long[] shape, int s, boolean candidate) {
        PlannedPoint p = points.get(name);
        if (p == null) return null;
        var st = steps.get(s);
        long T = st.length(), positions = st.lastPosition() + 1;
        String why = breach(p, shape, s, T, positions, candidate);
        if (why == null) return null;
        String hint = ProducerConventions.shapeHint(p, shape, T, positions);
        return why + (hint == null ? "" : "; " + hint);
    }

    private String breach(PlannedPoint p, long[] shape, int s, long T, long positions, boolean candidate) {
        long[] expected = shapeAt(p, s);
        String sized = p.shape().stream().anyMatch(d -> d instanceof Dim.Fixed) ? " = " + concrete(p, expected) : "";
        if (p.isRead()) {
            boolean rowsOk = shape.length == expected.length && shape[0] >= 1 && (candidate || shape[0] <= positions)
                    && (candidate || generic || expected[0] < 0 || shape[0] == expected[0]);
            if (rowsOk && trailingOk(shape, expected)) return null;
            String c = generic || expected[0] < 0 ? "1 ≤ C ≤ " + positions : "C = " + expected[0];
            return "expected " + p.form() + sized + " with " + c + " (the positions the step's last query reads)";
        }
        if (!p.hasRows()) {
            if (shape.length == expected.length && shape[0] >= 1 && trailingOk(shape, expected)) return null;
            return "expected " + p.form() + sized + " (the logits of the step's last position)";
        }
        if (shape.length != expected.length || shape[0] != T || !trailingOk(shape, expected))
            return "expected " + p.form() + sized + " with T = " + T + " (the tokens this step fed)";
        for (long d : shape) if (d < 1) return "expected " + p.form() + " with no empty axis";
        return null;
    }

    /** Axes after the first: each of known size must have it. */
    private static boolean trailingOk(long[] shape, long[] expected) {
        if (shape.length != expected.length) return false;
        for (int a = 0; a < shape.length; a++) {
            if (a == 0 && expected.length > 1) continue;
            if (expected[a] >= 0 && shape[a] != expected[a]) return false;
        }
        return true;
    }

    private static String concrete(PlannedPoint p, long[] sizes) {
        var parts = new ArrayList<String>();
        for (int a = 0; a < sizes.length; a++) parts.add(sizes[a] >= 0 ? Long.toString(sizes[a]) : p.shape().get(a).label());
        return "[" + String.join(", ", parts) + "]";
    }

    /** A shape as the format writes it: {@code [7, 4, 32]}. */
    public static String shapeText(long[] shape) {
        var parts = new ArrayList<String>();
        for (long d : shape) parts.add(d >= 0 ? Long.toString(d) : "?");
        return "[" + String.join(", ", parts) + "]";
    }
}
