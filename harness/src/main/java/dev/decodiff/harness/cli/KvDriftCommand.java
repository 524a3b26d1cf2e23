package dev.decodiff.harness.cli;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.engine.KvType;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.compare.CellStats;
import dev.decodiff.harness.compare.Comparison;
import dev.decodiff.harness.compare.ComparisonResult;
import dev.decodiff.harness.compare.ToleranceProfile;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.live.LiveCandidate;
import dev.decodiff.harness.live.ModelLocator;
import picocli.CommandLine.Command;
import picocli.CommandLine.Parameters;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;

/**
 * How far each KV-cache storage type drifts from the reference: the live engine, teacher-forced, once per
 * type, compared cell by cell; printed as Markdown tables per layer and per step.
 */
@Command(name = "kv-drift", mixinStandardHelpOptions = true,
        description = {"Measures how far each KV-cache type (bf16, q8_0, q4_0, K q8_0 / V q4_0) drifts from a reference.",
                "Per layer: the worst rel L2 of layers.i.out over all steps; per step: the rel L2 of the logits. Printed as Markdown (docs/kv-cache.md)."},
        footer = {"", "Exit codes: 0 done (drift is a measurement, not a verdict), 2 bad input."})
public final class KvDriftCommand implements Callable<Integer> {
    @Parameters(index = "0..*", paramLabel = "REFERENCE", description = "Reference dump folders (default: the bundled default case).")
    List<Path> references = new ArrayList<>();

    @picocli.CommandLine.Spec
    picocli.CommandLine.Model.CommandSpec spec;

    record Variant(String label, KvType k, KvType v) {}

    static final List<Variant> VARIANTS = List.of(
            new Variant("f32", KvType.F32, KvType.F32), new Variant("bf16", KvType.BF16, KvType.BF16),
            new Variant("q8_0", KvType.Q8_0, KvType.Q8_0), new Variant("K q8_0, V q4_0", KvType.Q8_0, KvType.Q4_0),
            new Variant("q4_0", KvType.Q4_0, KvType.Q4_0));

    @Override
    public Integer call() {
        var out = spec.commandLine().getOut();
        var refs = references.isEmpty() ? List.of(Home.defaultReference()) : references;
        for (Path refDir : refs) {
            var ref = DumpReader.open(refDir);
            Path modelDir = ModelLocator.locate(null, Home.get(), ref.manifest(), ref.manifestFile(), false).dir();
            try (var model = Gemma4Model.load(modelDir)) {
                report(out, refDir, ref, model);
            }
        }
        out.flush();
        return 0;
    }

    private void report(java.io.PrintWriter out, Path refDir, DumpReader ref, Gemma4Model model) {
        int layers = model.config().numLayers();
        var results = new ArrayList<ComparisonResult>();
        var bytes = new ArrayList<Long>();
        for (var v : VARIANTS) {
            var options = EngineOptions.defaults().withKvTypes(v.k(), v.v());
            var r = DumpReader.open(refDir);
            try (var live = LiveCandidate.forPoints(model, options, r.manifest(), r.allPoints(), false)) {
                results.add(Comparison.run(r, live, new Comparison.Options(ToleranceProfile.defaults(), false, null)));
            }
            bytes.add(model.newSession(options).kvBytesPerPosition());
        }
        out.printf("### %s (%s, %d steps)%n%n", Home.get().relativize(refDir.toAbsolutePath()), model.directory().getFileName(), ref.stepCount());
        var head = new StringBuilder("| KV cache | bytes/token | tokens agree | worst logits rel L2 |");
        var rule = new StringBuilder("|---|---:|---:|---:|");
        for (int l = 0; l < layers; l++) { head.append(" L").append(l).append(" out |"); rule.append("---:|"); }
        out.println(head);
        out.println(rule);
        for (int i = 0; i < VARIANTS.size(); i++) {
            var res = results.get(i);
            var row = new StringBuilder("| " + VARIANTS.get(i).label() + " | " + bytes.get(i) + " | "
                    + res.tokensWith(dev.decodiff.harness.compare.TokenAgreement.Status.AGREE) + "/" + res.tokens().size() + " | "
                    + fmt(worst(res, CapturePoints.LOGITS, -1)) + " |");
            for (int l = 0; l < layers; l++) row.append(" ").append(fmt(worst(res, CapturePoints.OUT, l))).append(" |");
            out.println(row);
        }
        out.println();
        out.println("Logits rel L2 per step:");
        out.println();
        var h2 = new StringBuilder("| step |");
        var r2 = new StringBuilder("|---:|");
        for (int i = 1; i < VARIANTS.size(); i++) { h2.append(" ").append(VARIANTS.get(i).label()).append(" |"); r2.append("---:|"); }
        out.println(h2);
        out.println(r2);
        for (int s = 0; s < ref.stepCount(); s++) {
            var row = new StringBuilder("| " + s + " |");
            for (int i = 1; i < VARIANTS.size(); i++) row.append(" ").append(fmt(cell(results.get(i), s, CapturePoints.LOGITS))).append(" |");
            out.println(row);
        }
        out.println();
    }

    private static double worst(ComparisonResult r, String kind, int layer) {
        double w = 0;
        for (CellStats c : r.cells())
            if (c.kind().equals(kind) && c.layer() == layer) w = Math.max(w, Double.isNaN(c.relL2()) ? Double.POSITIVE_INFINITY : c.relL2());
        return w;
    }

    private static double cell(ComparisonResult r, int step, String point) {
        for (CellStats c : r.cellsOfStep(step)) if (c.point().equals(point)) return c.relL2();
        throw new BadInputException("the reference has no " + point + " at step " + step);
    }

    private static String fmt(double v) { return v == 0 ? "0" : String.format("%.1e", v); }
}
