package dev.decodiff.harness.bench;

import dev.decodiff.metal.NativeKernels;
import dev.decodiff.metal.Parallel;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** The machine a bench ran on: its CPU, the threads the kernels use, which kernels ran. */
record Machine(String cpu, int threads, String kernels) {

    static Machine current() {
        String cpu = System.getProperty("os.arch");
        try {
            for (String line : Files.readAllLines(Path.of("/proc/cpuinfo")))
                if (line.startsWith("model name")) { cpu = line.substring(line.indexOf(':') + 1).strip(); break; }
        } catch (IOException | RuntimeException ignored) {
            // keep os.arch
        }
        return new Machine(cpu + ", " + Runtime.getRuntime().availableProcessors() + " cpus", Parallel.threads(), NativeKernels.status());
    }

    /** VmHWM of this process: the peak resident set, mapped weight pages included (off Linux: the heap in use). */
    static long peakRss() {
        long hwm = MeasuredRun.RssSampler.statusBytes("VmHWM:");
        if (hwm > 0) return hwm;
        var rt = Runtime.getRuntime();
        return rt.totalMemory() - rt.freeMemory();
    }
}
