package dev.decodiff.harness.bench;

import dev.decodiff.engine.arch.LoadedModel;
import dev.decodiff.engine.Probe;
import dev.decodiff.engine.Sampler;
import dev.decodiff.harness.dump.DumpManifest;
import dev.decodiff.harness.dump.DumpWriter;
import dev.decodiff.harness.live.CapturingProbe;
import dev.decodiff.harness.live.LiveStep;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * What capture costs a decode step at ~512: no probe, a probe that wants nothing, and every point captured and
 * written as a dump, the three modes interleaved step by step so drift hits them alike.
 */
record CaptureOverhead(Figure noProbeMs, Figure idleProbeMs, Figure dumpMs, long dumpBytesPerStep) {

    static CaptureOverhead measure(BenchSetup b, Prefill.Primed primed) throws IOException {
        b.log().accept("probe and dump overhead…");
        Path dir = b.work().resolve("overhead-dump");
        var dw = DumpWriter.create(dir, false, producer(), modelInfo(b.model()), List.of(), 0);
        var idle = new Probe() {
            @Override public boolean wants(String point) { return false; }
            @Override public float[] capture(String point, int[] shape, float[] data) { return null; }
        };
        var capture = new CapturingProbe(p -> true);
        var session = primed.session();
        double[][] ms = new double[3][b.decodeSteps()];
        int next = Sampler.argmax(primed.logits()); // any token does for timing; the session is past the prefill by now
        for (int i = 0; i < b.decodeSteps(); i++) {
            for (int mode = 0; mode < 3; mode++) {
                session.setProbe(mode == 0 ? null : mode == 1 ? idle : capture);
                int start = session.position();
                long t0 = System.nanoTime();
                float[] l = session.forward(new int[]{next});
                next = Sampler.argmax(l);
                if (mode == 2) dw.writeStep(start, 1, capture.take().values(), next, LiveStep.top2Margin(l));
                ms[mode][i] = BenchSetup.secondsSince(t0) * 1e3;
            }
        }
        session.setProbe(null);
        return new CaptureOverhead(Figure.of(ms[0]), Figure.of(ms[1]), Figure.of(ms[2]), dirBytes(dir) / Math.max(1, dw.stepsWritten()));
    }

    double idleOverhead() { return idleProbeMs.median() / noProbeMs.median(); }

    double dumpOverhead() { return dumpMs.median() / noProbeMs.median(); }

    static DumpManifest.Producer producer() { return new DumpManifest.Producer("decodiff-bench", "dev", "float32", "decodiff-java"); }

    static DumpManifest.Model modelInfo(LoadedModel m) {
        return new DumpManifest.Model(m.modelType(), m.numLayers(), m.configSha256(), null);
    }

    /** The bytes of every file under dir. */
    static long dirBytes(Path dir) throws IOException {
        try (var s = Files.walk(dir)) {
            return s.filter(Files::isRegularFile).mapToLong(p -> {
                try { return Files.size(p); } catch (IOException e) { throw new UncheckedIOException(e); }
            }).sum();
        }
    }
}
