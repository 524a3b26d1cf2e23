package dev.decodiff.harness.arch.gemma4.bisect;

import dev.decodiff.engine.arch.Gemma4Architecture;
import dev.decodiff.harness.bisect.Cells;
import dev.decodiff.harness.bisect.ReferenceTensors;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.harness.compare.ToleranceProfile;
import dev.decodiff.harness.compare.detect.DetectorContext;
import dev.decodiff.harness.compare.detect.Finding;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.dump.StepTensors;
import dev.decodiff.metal.DType;
import dev.decodiff.metal.TensorView;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Bisect's rewiring enumeration against mutations computed independently: make_rewire_mutations.py (NumPy alone,
 * beside the test's resources) recomputes a layer-0 cell of the bundled MoE and PLE references under a porting bug;
 * the candidate is the reference with that one tensor replaced, and the rewiring detector must name the bug — and
 * only that bug, by at least 10× over the runner-up.
 */
class RewireDetectorTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    static Path root() {
        Path p = Path.of("").toAbsolutePath();
        while (p != null && !Files.isDirectory(p.resolve("reference-dumps"))) p = p.getParent();
        return p;
    }

    @ParameterizedTest(name = "{0} {1}")
    @CsvSource(delimiter = '|', value = {
            "gemma4-tiny-moe|layers.0.moe.out/routing-not-renormalised|the routing weights are not renormalised after top-k",
            "gemma4-tiny-moe|layers.0.moe.out/expert-scale-by-rank|per_expert_scale is indexed by the expert's rank in the top-k instead of its id",
            "gemma4-tiny-moe|layers.0.moe.out/expert-scale-missing|per_expert_scale is not applied",
            "gemma4-tiny-moe|layers.0.moe.out/expert-scale-twice|per_expert_scale is applied twice",
            "gemma4-tiny-moe|layers.0.moe.out/router-unnormed|the router reads the un-normed residual",
            "gemma4-tiny-ple|ple/table-scale-missing|the PLE table's √P scale is missing",
            "gemma4-tiny-ple|ple/combine-missing|the 2^-½ combine is missing",
            "gemma4-tiny-ple|layers.0.out/layer-scalar-before-ple|layer_scalar is applied before the per-layer input branch",
            "gemma4-tiny-ple|layers.0.out/slice-layer-major|the gate's per-layer slice read layer-major",
            "gemma4-tiny-ple|layers.0.out/branch-before-mlp|the per-layer input branch is computed from the residual before the MLP's add"})
    void namesTheMutationThatMadeTheCandidate(String checkpoint, String mutation, String expected) throws Exception {
        var found = explain(checkpoint, mutation);
        assertThat(found).as(mutation).isNotNull();
        assertThat(found.variant()).as(found.sentence()).isNotNull();
        assertThat(found.variant().op()).isEqualTo(RewireDetector.OP);
        assertThat(found.variant().name()).as(found.sentence()).startsWith(expected);
        assertThat(found.sentence()).contains("runner-up");
        assertThat(found.variant().runnerUp()).isNotNull().isNotEqualTo(found.variant().name());
        assertThat(found.variant().margin()).isGreaterThanOrEqualTo(VariantSearch.MIN_MARGIN);
    }

    @Test
    void theProjectionScaleBeforeItsNormIsInvisible() throws Exception {
        // the rms-norm right after it cancels a constant scale of the projection (up to eps): compare sees no bug to explain
        var root = root();
        float[] mutated = read(root.resolve("harness/src/test/resources/dev/decodiff/harness/bisect/rewire-mutations-gemma4-tiny-ple.safetensors"))
                .get("ple/projection-scale-missing");
        try (var refs = new ReferenceTensors(DumpReader.open(root.resolve("reference-dumps/gemma4-tiny-ple/short")))) {
            float[] ref = refs.floats(0, CapturePoints.PLE);
            assertThat(Recompute.rel(mutated, ref)).isLessThan(ToleranceProfile.defaults().tolerance(CapturePoints.PLE));
        }
    }

    @Test
    void theUnmutatedReferenceIsNotExplainedByAnyRewiring() throws Exception {
        var root = root();
        var model = Gemma4Model.load(root.resolve("checkpoints/gemma4-tiny-moe"));
        try (var refs = new ReferenceTensors(DumpReader.open(root.resolve("reference-dumps/gemma4-tiny-moe/short")))) {
            var step = refs.step(0);
            String p = CapturePoints.layer(0, CapturePoints.MOE_OUT);
            var r = step.tensor(p);
            double tol = ToleranceProfile.defaults().tolerance(p);
            var ctx = new DetectorContext(Cells.of(0, p, r, r, tol), step, step, DetectorContext.nearEqual(tol), Gemma4Architecture.INSTANCE.wrap(model), refs);
            assertThat(new RewireDetector().explain(ctx)).isNull();
        }
    }

    @Test
    void twoVariantsWithinTenfoldOfEachOtherAreListedAndNeitherIsNamed() throws Exception {
        var root = root();
        String mutation = "layers.0.moe.out/routing-not-renormalised", point = "layers.0.moe.out";
        float[] mutated = read(root.resolve("harness/src/test/resources/dev/decodiff/harness/bisect/rewire-mutations-gemma4-tiny-moe.safetensors")).get(mutation);
        var model = Gemma4Model.load(root.resolve("checkpoints/gemma4-tiny-moe"));
        try (var refs = new ReferenceTensors(DumpReader.open(root.resolve("reference-dumps/gemma4-tiny-moe/short")))) {
            var step = refs.step(0);
            var r = step.tensor(point);
            var c = new TensorView(point, DType.F32, r.shape(), MemorySegment.ofArray(le(mutated)));
            double tol = ToleranceProfile.defaults().tolerance(point);
            var ctx = new DetectorContext(Cells.of(0, point, r, c, tol), step, new Replaced(step, point, c), DetectorContext.nearEqual(tol), Gemma4Architecture.INSTANCE.wrap(model), refs);
            float[] standard = r.toFloats();
            // A: the candidate off by 1e-6 relative; B: off by 3e-6 — both reproduce it, only 3x apart
            float[] a = mutated.clone(), b = mutated.clone();
            for (int i = 0; i < a.length; i++) {
                a[i] *= 1 + (i % 2 == 0 ? 1e-6f : -1e-6f);
                b[i] *= 1 + (i % 2 == 0 ? 3e-6f : -3e-6f);
            }
            var found = VariantSearch.best("test", ctx, standard, java.util.List.of(new VariantSearch.Variant("A", () -> a), new VariantSearch.Variant("B", () -> b)));
            assertThat(found).isNotNull();
            assertThat(found.variant()).as(found.sentence()).isNull();
            assertThat(found.sentence()).contains("two explanations fit").contains("A (rel L2").contains("B (rel L2");
            // 100x apart: the closer one is named, the other given as the runner-up
            for (int i = 0; i < b.length; i++) b[i] = mutated[i] * (1 + (i % 2 == 0 ? 1e-4f : -1e-4f));
            var named = VariantSearch.best("test", ctx, standard, java.util.List.of(new VariantSearch.Variant("A", () -> a), new VariantSearch.Variant("B", () -> b)));
            assertThat(named.variant().name()).isEqualTo("A");
            assertThat(named.sentence()).contains("runner-up B");
        }
    }

    private static Finding explain(String checkpoint, String mutation) throws Exception {
        var root = root();
        String point = mutation.substring(0, mutation.indexOf('/'));
        float[] mutated = read(root.resolve("harness/src/test/resources/dev/decodiff/harness/bisect/rewire-mutations-" + checkpoint + ".safetensors")).get(mutation);
        assertThat(mutated).as(mutation).isNotNull();
        var model = Gemma4Model.load(root.resolve("checkpoints/" + checkpoint));
        try (var refs = new ReferenceTensors(DumpReader.open(root.resolve("reference-dumps/" + checkpoint + "/short")))) {
            var step = refs.step(0);
            var r = step.tensor(point);
            var c = new TensorView(point, DType.F32, r.shape(), MemorySegment.ofArray(le(mutated)));
            var cand = new Replaced(step, point, c);
            double tol = ToleranceProfile.defaults().tolerance(point);
            var cell = Cells.of(0, point, r, c, tol);
            var ctx = new DetectorContext(cell, step, cand, DetectorContext.nearEqual(tol), Gemma4Architecture.INSTANCE.wrap(model), refs);
            return new RewireDetector().explain(ctx);
        }
    }

    private static byte[] le(float[] f) {
        var b = ByteBuffer.allocate(f.length * 4).order(ByteOrder.LITTLE_ENDIAN);
        for (float x : f) b.putFloat(x);
        return b.array();
    }

    /** The F32 tensors of a safetensors file. */
    private static Map<String, float[]> read(Path file) throws Exception {
        byte[] all = Files.readAllBytes(file);
        var bb = ByteBuffer.wrap(all).order(ByteOrder.LITTLE_ENDIAN);
        int n = (int) bb.getLong(0);
        var header = JSON.readTree(new String(all, 8, n, java.nio.charset.StandardCharsets.UTF_8));
        var out = new HashMap<String, float[]>();
        for (var it = header.fields(); it.hasNext(); ) {
            var e = it.next();
            if (e.getKey().equals("__metadata__")) continue;
            long s = e.getValue().get("data_offsets").get(0).asLong(), end = e.getValue().get("data_offsets").get(1).asLong();
            float[] f = new float[(int) ((end - s) / 4)];
            for (int i = 0; i < f.length; i++) f[i] = bb.getFloat((int) (8 + n + s + 4L * i));
            out.put(e.getKey(), f);
        }
        return out;
    }

    /** A step whose one point is replaced by the mutated tensor. */
    private record Replaced(StepTensors base, String point, TensorView tensor) implements StepTensors {
        @Override public int index() { return base.index(); }
        @Override public int start() { return base.start(); }
        @Override public int length() { return base.length(); }
        @Override public Set<String> points() { return base.points(); }
        @Override public TensorView tensor(String p) { return p.equals(point) ? tensor : base.tensor(p); }
        @Override public String origin() { return "mutated " + point; }
        @Override public Integer nextToken() { return base.nextToken(); }
        @Override public Double top2Margin() { return base.top2Margin(); }
        @Override public void close() {}
    }
}
