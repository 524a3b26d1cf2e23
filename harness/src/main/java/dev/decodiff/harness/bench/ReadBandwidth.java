package dev.decodiff.harness.bench;

import dev.decodiff.metal.NativeKernels;
import dev.decodiff.metal.Parallel;
import dev.decodiff.metal.StreamRead;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * The machine's read bandwidth over the whole weights file (the same pages the engine reads, with the same threads):
 * the Java streaming read and, where the native kernels run, the native one (it prefetches, as the native matvec
 * does); the faster of the two is the yardstick. Samples alternate so drift hits both alike.
 *
 * @param nativeGbs null where the native kernels are not available
 */
record ReadBandwidth(Figure javaGbs, Figure nativeGbs) {

    static ReadBandwidth measure(BenchSetup b) throws IOException {
        b.log().accept("read bandwidth (" + Parallel.threads() + " threads; kernels: " + NativeKernels.status() + ")…");
        try (var arena = Arena.ofShared(); var ch = FileChannel.open(b.checkpoint().resolve("model.safetensors"), StandardOpenOption.READ)) {
            var seg = ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size(), arena);
            StreamRead.read(seg); // page in
            StreamRead.read(seg, true);
            boolean nat = NativeKernels.available();
            double[] sj = new double[2 * b.repeats() + 1], sn = new double[sj.length];
            for (int i = 0; i < sj.length; i++) {
                long t0 = System.nanoTime();
                StreamRead.read(seg, false);
                sj[i] = BenchSetup.secondsSince(t0);
                if (!nat) continue;
                t0 = System.nanoTime();
                StreamRead.read(seg, true);
                sn[i] = BenchSetup.secondsSince(t0);
            }
            double gb = seg.byteSize() / 1e9;
            return new ReadBandwidth(Figure.rates(gb, sj), nat ? Figure.rates(gb, sn) : null);
        }
    }

    /** The faster streaming read: what decode's weight traffic is measured against. */
    Figure yardstick() { return nativeGbs != null && nativeGbs.median() > javaGbs.median() ? nativeGbs : javaGbs; }
}
