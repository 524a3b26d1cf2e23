package dev.decodiff.harness.cli;

import dev.decodiff.harness.Home;
import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.arch.LoadedModel;
import dev.decodiff.engine.KvType;
import dev.decodiff.harness.compare.Comparison;
import dev.decodiff.harness.compare.ToleranceProfile;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.arch.ArchitectureSupports;
import dev.decodiff.harness.arch.TunableEngine;
import dev.decodiff.harness.live.ObserverCheck;
import dev.decodiff.harness.live.ModelLocator;
import dev.decodiff.harness.report.KvDriftReport;
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
            var tunable = ArchitectureSupports.tunableEngineFor(modelDir);
            try (var model = tunable.load(modelDir)) {
                report(out, refDir, ref, tunable, model);
            }
        }
        out.flush();
        return 0;
    }

    private void report(java.io.PrintWriter out, Path refDir, DumpReader ref, TunableEngine tunable, LoadedModel model) {
        var rows = new ArrayList<KvDriftReport.Row>();
        for (var v : VARIANTS) {
            var options = EngineOptions.defaults().withKvTypes(v.k(), v.v());
            var r = DumpReader.open(refDir);
            try (var live = tunable.live(model, options, r.manifest(), r.allPoints(), ObserverCheck.OFF)) {
                var result = Comparison.run(r, live, new Comparison.Options(ToleranceProfile.forReference(r.manifest().producer()), false, null));
                rows.add(new KvDriftReport.Row(v.label(), tunable.kvBytesPerPosition(model, options), result));
            }
        }
        out.print(dev.decodiff.harness.Printable.lines(KvDriftReport.markdown(Home.get().relativize(refDir.toAbsolutePath()).toString(), model.directory().getFileName().toString(),
                ref.stepCount(), model.numLayers(), rows)));
    }
}
