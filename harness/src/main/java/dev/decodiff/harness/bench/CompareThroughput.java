package dev.decodiff.harness.bench;

import dev.decodiff.engine.EngineOptions;
import dev.decodiff.harness.compare.Comparison;
import dev.decodiff.harness.dump.DumpWriter;
import dev.decodiff.harness.live.DumpRecorder;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;

/**
 * Compare throughput on a large dump pair (a {@link BenchSetup#PREFILL}-token prefill step and two decode steps,
 * every point), in GB of tensor data per second: warm, and the first, cold pass on its own (what a single
 * {@code decodiff compare} sees).
 */
record CompareThroughput(Figure warmGbs, Figure firstGbs) {

    static CompareThroughput measure(BenchSetup b) throws IOException {
        b.log().accept("compare…");
        Path a = b.work().resolve("dump-a"), c = b.work().resolve("dump-b");
        int[] prompt = b.prompt(BenchSetup.PREFILL);
        var w = DumpWriter.create(a, false, CaptureOverhead.producer(), CaptureOverhead.modelInfo(b.model()),
                Arrays.stream(prompt).boxed().toList(), prompt.length);
        var model = b.model();
        new DumpRecorder(probe -> b.engine().session(model, EngineOptions.defaults(), probe), p -> true, w, () -> new IllegalStateException("the bench dump captured no tensor"))
                .greedy(prompt, 3, done -> {});
        w.finish();
        copyTree(a, c);
        double gb = (tensorBytes(a) + tensorBytes(c)) / 1e9;
        // Warm-up, as for decode and prefill: the first compare runs the cell kernel in the interpreter and C1 (the
        // Vector API is fast only once C2 has compiled it), which takes more than one pass over a pair this size.
        long w0 = System.nanoTime();
        Comparison.compareDumps(a, c, Comparison.Options.defaults());
        Figure first = Figure.rates(gb, new double[]{BenchSetup.secondsSince(w0)});
        for (int runs = 1; runs < 3 || System.nanoTime() - w0 < 3_000_000_000L; runs++) Comparison.compareDumps(a, c, Comparison.Options.defaults());
        double[] sec = new double[Math.max(b.repeats(), 5)];
        for (int i = 0; i < sec.length; i++) {
            long t0 = System.nanoTime();
            var result = Comparison.compareDumps(a, c, Comparison.Options.defaults());
            sec[i] = BenchSetup.secondsSince(t0);
            if (result == null) throw new IllegalStateException("no comparison result");
        }
        return new CompareThroughput(Figure.rates(gb, sec), first);
    }

    private static long tensorBytes(Path dump) throws IOException {
        long n = 0;
        try (var s = Files.list(dump)) {
            for (Path p : s.filter(p -> p.getFileName().toString().endsWith(".safetensors")).toList()) n += Files.size(p);
        }
        return n;
    }

    /**
     * Copies the dump in whole 4 MiB writes, as decodiff's own writer writes (so both sides of the pair sit in the page
     * cache the same way; Files.copy's in-kernel copy leaves the copy in 4 KB pages, slower to map).
     */
    private static void copyTree(Path from, Path to) throws IOException {
        Files.createDirectories(to);
        var buf = java.nio.ByteBuffer.allocateDirect(4 << 20);
        try (var s = Files.list(from)) {
            for (Path p : s.toList()) {
                try (var in = FileChannel.open(p, StandardOpenOption.READ);
                     var out = FileChannel.open(to.resolve(p.getFileName()), StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                    for (long done = 0, size = in.size(); done < size; ) {
                        buf.clear();
                        while (buf.hasRemaining() && in.read(buf) > 0) {
                            // fill the chunk
                        }
                        buf.flip();
                        if (!buf.hasRemaining()) throw new IOException(p + " ended early while being copied");
                        while (buf.hasRemaining()) done += out.write(buf);
                    }
                }
            }
        }
    }
}
