package dev.decodiff.harness.bisect;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.decodiff.engine.CapturePoints;
import dev.decodiff.harness.compare.CellStats;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.report.Fmt;
import dev.decodiff.llamacpp.LlamaCppRunner;
import dev.decodiff.llamacpp.ffi.LlamaContext;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Bisect's first level on llama.cpp: every cell's local error. llama.cpp runs the reference's steps teacher-forced with
 * the reference's own tensors written into its graph through the eval callback (embed, and per layer q, k, v,
 * attn.out, the dense mlp.out, moe.out and out; final_norm): each op then computes from the reference's inputs, and
 * the K/V cache fills with the reference's keys and values, so every later step reads the reference's history. What
 * llama.cpp computed at each point (captured before the replacement) against the reference is that op's local error:
 * drift inherited from upstream is gone. The culprit is the first cell in causal order whose local error is over
 * {@link #FLOOR} — one fp16 step (2^-10), the coarsest rounding llama.cpp's fp32 path applies (its GELU table, which
 * leaves ≈ 3e-4 on every MLP output); anything finer than that floor is not resolved here. A MoE layer's dense mlp.out
 * is an unnamed product llama.cpp's graph does not let decodiff replace: there, out's local error includes it. The
 * culprit is then diagnosed with bisect's own detectors ({@link Bisector#DETECTORS}): its op recomputed from the
 * reference's inputs and the checkpoint's weights under each enumerated variant; the variant that reproduces
 * llama.cpp's local output names the bug, as on decodiff's engine.
 * <p>On Qwen3.5 the points written are the states as the memory module hands them to each linear-attention layer
 * (conv and recurrent), so every step's recurrence starts from the reference's history, and the contiguous outputs
 * ({@link #QWEN35_LAYER_POINTS}); a broken state hand-over then shows at the state read itself, and an op inside the
 * layer at its own point.
 */
public final class LlamaCppLocalErrors {
    public static final double FLOOR = 0x1p-10;

    /** Points written into the graph, per layer and for the model. */
    static final List<String> LAYER_POINTS = List.of(CapturePoints.Q, CapturePoints.K, CapturePoints.V, CapturePoints.ATTN_OUT,
            CapturePoints.MLP_OUT, CapturePoints.MOE_OUT, CapturePoints.OUT);

    /**
     * Qwen3.5's points written into the graph: the states as read from the memory module (so each step's recurrence
     * starts from the reference's history), the linear-attention and attention outputs, the FFN's and the layer's.
     * The linear layer's q/k/v, β and decay are strided views of the conv's output or folded into the fused op: they
     * are compared as llama.cpp computes them from the reference's layer input and conv state.
     */
    static final List<String> QWEN35_LAYER_POINTS = List.of(CapturePoints.LINEAR_CONV_STATE_READ, CapturePoints.LINEAR_STATE_READ,
            CapturePoints.LINEAR_OUT, CapturePoints.Q, CapturePoints.K, CapturePoints.V, CapturePoints.ATTN_GATE, CapturePoints.ATTN_OUT,
            CapturePoints.MLP_OUT, CapturePoints.MOE_OUT, CapturePoints.OUT);

    /** The per-layer points replaced for this reference's architecture. */
    static List<String> layerPoints(dev.decodiff.harness.dump.DumpManifest m) {
        String type = m.model() == null || m.model().modelType() == null ? "" : m.model().modelType();
        return type.startsWith("qwen3_5") ? QWEN35_LAYER_POINTS : LAYER_POINTS;
    }

    public record Cell(int step, String point, double local) {}

    public record Result(String reference, String candidate, List<Cell> cells, Cell culprit, Map<String, Cell> worstBelowFloorByKind,
                         String diagnosis, dev.decodiff.harness.compare.detect.Finding.Variant variant) {
        public boolean diverges() { return culprit != null; }
    }

    public static Result run(Path referenceDir, Path gguf, LlamaContext.Options options, String candidate) { return run(referenceDir, gguf, options, candidate, null); }

    /** With {@code checkpoint} (its weights), the culprit is also diagnosed by bisect's detectors. */
    public static Result run(Path referenceDir, Path gguf, LlamaContext.Options options, String candidate, Path checkpoint) {
        // a point whose graph tensor this build does not compute (a patched graph may name it otherwise) is compared where
        // captured but not replaced: the run starts again without it
        var unreplaceable = new java.util.HashSet<String>();
        for (int attempt = 0; ; attempt++) {
            try {
                return attempt(referenceDir, gguf, options, candidate, unreplaceable, checkpoint);
            } catch (dev.decodiff.llamacpp.NotReplacedException e) {
                if (attempt > 3 || !unreplaceable.addAll(e.points())) throw e;
            }
        }
    }

    private static Result attempt(Path referenceDir, Path gguf, LlamaContext.Options options, String candidate, java.util.Set<String> unreplaceable,
                                  Path checkpoint) {
        var ref = DumpReader.open(referenceDir);
        var m = ref.manifest();
        var cells = new ArrayList<Cell>();
        var points = ref.allPoints();
        var replaced = layerPoints(m);
        // each step's captures, until the first step with a cell over the floor (the culprit's step) is kept
        Map<String, dev.decodiff.harness.dump.CapturedTensor> culpritStep = null;
        int culpritStepIndex = -1;
        try (var runner = LlamaCppRunner.open(gguf, options, points::contains)) {
            for (int s = 0; s < m.stepCount(); s++) {
                try (var step = ref.readStep(s)) {
                    var subs = new HashMap<String, float[]>();
                    for (String p : step.points()) {
                        String kind = CapturePoints.kindOf(p);
                        int layer = CapturePoints.layerOf(p);
                        boolean layerPoint = layer >= 0 && replaced.contains(kind)
                                && !(kind.equals(CapturePoints.MLP_OUT) && step.has(CapturePoints.layer(layer, CapturePoints.MOE_OUT)));
                        if ((layerPoint || p.equals(CapturePoints.EMBED) || p.equals(CapturePoints.FINAL_NORM)) && !unreplaceable.contains(p))
                            subs.put(p, step.tensor(p).toFloats());
                    }
                    var st = m.step(s);
                    // a MoE layer's mlp.out is not a named graph tensor: it is compared, not replaced
                    var got = runner.step(m.stepTokens(s), st.start(), step.points(), subs);
                    boolean over = false;
                    for (String p : step.points()) {
                        var c = got.tensors().get(p);
                        if (c == null) continue;
                        float[] want = step.tensor(p).toFloats();
                        double local = c.data().length == want.length ? CellStats.relL2(c.data(), want) : Double.POSITIVE_INFINITY;
                        cells.add(new Cell(s, p, Double.isNaN(local) ? Double.POSITIVE_INFINITY : local));
                        over |= !(local <= FLOOR);
                    }
                    if (over && culpritStep == null) {
                        culpritStep = new LinkedHashMap<>();
                        for (var c : got.tensors().values()) culpritStep.put(c.point(), dev.decodiff.harness.dump.CapturedTensor.of(c.point(), c.shape(), c.data()));
                        culpritStepIndex = s;
                    }
                }
            }
        }
        cells.sort(Comparator.comparingInt(Cell::step).thenComparingLong(c -> CapturePoints.causalRank(c.point())));
        Cell culprit = cells.stream().filter(c -> !(c.local() <= FLOOR)).findFirst().orElse(null);
        var worst = new LinkedHashMap<String, Cell>();
        for (var c : cells) {
            if (!(c.local() <= FLOOR) || culprit != null && order(c) >= order(culprit)) continue;
            worst.merge(CapturePoints.kindOf(c.point()), c, (a, b) -> a.local() >= b.local() ? a : b);
        }
        String diagnosis = null;
        dev.decodiff.harness.compare.detect.Finding.Variant variant = null;
        if (culprit != null && checkpoint != null && culpritStep != null && replaced == LAYER_POINTS) { // the detectors recompute Gemma 4's ops
            var found = diagnose(ref, culprit, culpritStepIndex, culpritStep, checkpoint);
            if (found != null) {
                diagnosis = found.sentence();
                variant = found.variant();
            }
        }
        else if (culprit != null && checkpoint != null && culpritStep != null && culpritStep.containsKey(culprit.point())) {
            var found = nameByCatalog(ref, culprit, culpritStep.get(culprit.point()).data(), checkpoint);
            if (found != null) {
                diagnosis = found.diagnosis();
                variant = found.variant();
            }
        }
        return new Result(referenceDir.toString(), candidate, cells, culprit, worst, diagnosis, variant);
    }

    /** Bisect's detectors on the culprit: llama.cpp's local output against the reference, with the weights and history. */
    private static dev.decodiff.harness.compare.detect.Finding diagnose(DumpReader ref, Cell culprit, int s,
                                                                        Map<String, dev.decodiff.harness.dump.CapturedTensor> captured, Path checkpoint) {
        var st = ref.manifest().step(s);
        try (var refs = new ReferenceTensors(ref); var refStep = ref.readStep(s)) {
            var local = new dev.decodiff.harness.live.LiveStep(s, st.start(), st.length(), captured, -1, Double.NaN, "llama.cpp on the reference's input, step " + s);
            var cell = Cells.of(s, culprit.point(), refStep.tensor(culprit.point()), local.tensor(culprit.point()), 1e-4);
            return dev.decodiff.harness.arch.ArchitectureSupports.of(dev.decodiff.engine.arch.Architectures.of(checkpoint))
                    .explainCulprit(checkpoint, cell, refStep, local, refs);
        } catch (RuntimeException e) {
            // a diagnosis is a bonus: its absence leaves the culprit as found
            return null;
        }
    }

    /**
     * Another architecture's culprit named by its fault catalog: decodiff's engine replayed teacher-forced with each
     * fault alone, the fault whose tensor at the culprit cell reproduces llama.cpp's local output (the catalog bisect's
     * own naming rule).
     */
    private static CatalogBisector.Naming nameByCatalog(DumpReader ref, Cell culprit, float[] local, Path checkpoint) {
        try (var model = dev.decodiff.engine.arch.Architectures.load(checkpoint)) {
            if (model.architecture().faultNames().isEmpty()) return null;
            var profile = dev.decodiff.harness.compare.ToleranceProfile.forReference(ref.manifest().producer());
            return new CatalogBisector(model, ref, profile).name(culprit.step(), culprit.point(), local);
        } catch (RuntimeException e) {
            // a name is a bonus: its absence leaves the culprit as found
            return null;
        }
    }

    private static long order(Cell c) { return (long) c.step() * 1_000_000L + CapturePoints.causalRank(c.point()); }

    public static String terminal(Result r) {
        var b = new StringBuilder();
        b.append("decodiff bisect --engine llama.cpp (local errors)\n");
        b.append("  reference  ").append(r.reference()).append('\n');
        b.append("  candidate  ").append(r.candidate()).append(", every op fed the reference's inputs and cache history\n");
        b.append(Fmt.format("  floor      %.2e (2^-10: one fp16 step, llama.cpp's coarsest rounding on its fp32 path); %d cells\n\n", FLOOR, r.cells().size()));
        if (r.culprit() == null) {
            b.append("NO LOCAL ERROR OVER THE FLOOR\n  every op of every step reproduces the reference from the reference's own inputs to within one fp16 step.\n");
        } else {
            var c = r.culprit();
            b.append("CULPRIT\n");
            b.append(Fmt.format("  step %d, %s: local rel L2 %s on the reference's own inputs (floor %.2e).\n", c.step(), c.point(),
                    Double.isInfinite(c.local()) ? "∞ (another shape)" : Fmt.format("%.3g", c.local()), FLOOR));
            if (r.diagnosis() != null) b.append("  Diagnosis: ").append(r.diagnosis()).append('\n');
            if (r.variant() != null) b.append("  Variant: ").append(r.variant().op()).append(": ").append(r.variant().name()).append('\n');
        }
        if (!r.worstBelowFloorByKind().isEmpty()) {
            b.append("  before it, llama.cpp's own precision (worst local error per point, all under the floor):");
            for (var e : r.worstBelowFloorByKind().entrySet())
                if (e.getValue().local() > 1e-5) b.append(Fmt.format(" %s %.1e", e.getKey(), e.getValue().local()));
            b.append('\n');
        }
        return b.toString();
    }

    public static ObjectNode json(Result r) {
        var o = new ObjectMapper().createObjectNode();
        o.put("verdict", r.diverges() ? "divergence" : "match");
        o.put("reference", r.reference());
        o.put("candidate", r.candidate());
        o.put("floor", FLOOR);
        if (r.culprit() != null) {
            var c = o.putObject("culprit");
            c.put("step", r.culprit().step());
            c.put("point", r.culprit().point());
            c.put("local_rel_l2", Double.isInfinite(r.culprit().local()) ? null : r.culprit().local());
            if (r.diagnosis() != null) c.put("diagnosis", r.diagnosis());
            if (r.variant() != null) {
                var v = c.putObject("variant");
                v.put("op", r.variant().op());
                v.put("name", r.variant().name());
            }
        } else o.putNull("culprit");
        var w = o.putObject("worst_below_floor");
        r.worstBelowFloorByKind().forEach((k, c) -> w.put(k, c.local()));
        return o;
    }
}
