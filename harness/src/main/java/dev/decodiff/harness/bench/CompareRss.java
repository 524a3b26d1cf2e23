package dev.decodiff.harness.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.decodiff.harness.report.Fmt;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.StringJoiner;
import java.util.function.Consumer;

/**
 * {@code bench --compare-rss N} and {@code bench --compare-time N}: what a live {@code decodiff compare} of an N-token
 * prompt on the bench model costs as a user runs it — in a JVM of its own with the launcher's flags and default heap.
 * The reference is a dump of the same model ({@code decodiff dump}, the prefill and one decode step, every point),
 * made in a child JVM too (its cost is reported beside) or reused from the cache. Reported: the peak resident set
 * (VmHWM), the sampled peak split into the checkpoint's mapped pages, the reference's mapped pages, other files and
 * anonymous memory (heap, native buffers), the most heap in use, wall and CPU time, and where the time went
 * ({@link dev.decodiff.harness.PartClock}: load, prefill, decode, reference reads, staging, compare kernels,
 * attribution, the observer check, report). {@code --compare-time} runs the compare exactly as a user does, observer
 * check included; {@code --compare-rss} without it ({@code --no-observer-check}), as it always has.
 */
record CompareRss(int promptTokens, long referenceBytes, boolean observerCheck, String observerEffect, Usage dump, Usage compare) {

    /** Seconds of one part of a child run: wall and the process's CPU time. */
    record Part(String name, double wallS, double cpuS) {}

    /** What one child run cost (see {@link MeasuredRun}). */
    record Usage(double wallS, double cpuS, double jvmStartS, String loadAverage, List<Part> parts, long peakRss, long sampledPeakRss, long weightsRss,
                 long referenceRss, long otherFilesRss, long anonymousRss, long anonymousHugeRss, long heapCommittedAtPeak, long maxHeapUsed,
                 long maxHeapLive, long heapLimit) {
        static Usage of(JsonNode j) {
            var parts = new ArrayList<Part>();
            j.path("parts").properties().forEach(e -> parts.add(new Part(e.getKey(), e.getValue().path("wall_s").asDouble(), e.getValue().path("cpu_s").asDouble())));
            return new Usage(j.get("wall_s").asDouble(), j.path("cpu_s").asDouble(), j.path("jvm_start_s").asDouble(),
                    j.path("load_average_start").asText() + " → " + j.path("load_average_end").asText(), List.copyOf(parts),
                    j.get("peak_rss_bytes").asLong(), j.get("sampled_peak_rss_bytes").asLong(),
                    j.get("weights_rss_bytes").asLong(), j.get("reference_rss_bytes").asLong(), j.get("other_files_rss_bytes").asLong(),
                    j.get("anonymous_rss_bytes").asLong(), j.get("anonymous_huge_pages_rss_bytes").asLong(), j.get("heap_committed_at_peak_bytes").asLong(), j.get("max_heap_used_bytes").asLong(),
                    j.get("max_heap_live_bytes").asLong(), j.get("heap_limit_bytes").asLong());
        }
    }

    static final int STEPS = 2;

    /**
     * Makes the reference (or reuses {@code cached} when it holds one) and measures the compare. With {@code keep} a
     * reference made here is moved to {@code cached} for later runs; otherwise it lives and dies in {@code work}.
     */
    static CompareRss measure(BenchSpec spec, Path checkpoint, int tokens, boolean observerCheck, Path cached, boolean keep, Path work,
                              Consumer<String> log) throws IOException {
        Usage dump = null;
        Path ref = cached;
        if (!Files.isRegularFile(cached.resolve("manifest.json"))) {
            ref = keep ? Files.createTempDirectory(cached.getParent(), cached.getFileName() + ".partial-") : work.resolve("reference");
            Files.deleteIfExists(ref);
            var ids = new StringJoiner(",");
            for (int t : BenchSetup.randomPrompt(spec.seed(), spec.vocab(), tokens)) ids.add(Integer.toString(t));
            log.accept(Fmt.format("live compare: dumping a %,d-token prompt and %d steps of every point (a child JVM)…", tokens, STEPS));
            try {
                dump = Usage.of(child(work, "dump", checkpoint, ref, List.of("dump", "--model", checkpoint.toString(), "--tokens", ids.toString(),
                        "-n", Integer.toString(STEPS), "--out", ref.toString())));
                if (keep) {
                    Files.move(ref, cached, StandardCopyOption.ATOMIC_MOVE);
                    ref = cached;
                }
            } finally {
                if (keep && !ref.equals(cached)) BenchCommand.deleteTree(ref); // a reference left half-made is no cache
            }
        } else {
            log.accept("live compare: reusing the reference " + cached);
        }
        long refBytes = CaptureOverhead.dirBytes(ref);
        log.accept(Fmt.format("live compare against the %.2f GB reference (a child JVM, the launcher's default heap%s)…", refBytes / 1e9,
                observerCheck ? ", observer check on" : ", --no-observer-check"));
        var args = new ArrayList<>(List.of("compare", ref.toString(), "--model", checkpoint.toString(), "--json"));
        if (!observerCheck) args.add("--no-observer-check");
        var measured = child(work, "compare", checkpoint, ref, args);
        var verdict = new ObjectMapper().readTree(work.resolve("compare.out").toFile());
        if (!"match".equals(verdict.path("verdict").asText()) || verdict.path("steps").path("compared").asInt() != STEPS)
            throw new IllegalStateException("the live compare of the engine against its own dump did not match on all " + STEPS + " steps: "
                    + verdict.path("verdict").asText() + ", " + verdict.path("steps"));
        String observer = verdict.path("observer_effect").asText();
        if (observerCheck && !"none".equals(observer))
            throw new IllegalStateException("the live compare's observer check found an effect of the probes: " + observer);
        return new CompareRss(tokens, refBytes, observerCheck, observer, dump, Usage.of(measured));
    }

    /**
     * decodiff's CLI in a fresh JVM under {@link MeasuredRun}, with this JVM's options (under the launcher: the
     * launcher's) but the default heap, whatever heap this JVM was given; its measurements.
     */
    private static JsonNode child(Path work, String name, Path checkpoint, Path reference, List<String> args) throws IOException {
        Path result = work.resolve(name + "-memory.json"), out = work.resolve(name + ".out"), err = work.resolve(name + ".err");
        var cmd = new ArrayList<>(OneShot.jvmCommand());
        cmd.removeLast(); // decodiff's main class: MeasuredRun calls it
        cmd.removeIf(CompareRss::setsHeap);
        cmd.addAll(List.of(MeasuredRun.class.getName(), result.toString(), checkpoint.toString(), reference.toString()));
        cmd.addAll(args);
        try {
            int code = new ProcessBuilder(cmd).redirectOutput(out.toFile()).redirectError(err.toFile()).start().waitFor();
            if (code != 0 || !Files.isRegularFile(result)) {
                var lines = Files.readAllLines(err);
                throw new IllegalStateException("bench: decodiff " + name + " in the child JVM exited with " + code + ": "
                        + String.join(" | ", lines.subList(Math.max(0, lines.size() - 5), lines.size())));
            }
            return new ObjectMapper().readTree(result.toFile());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while decodiff " + name + " ran", e);
        }
    }

    private static boolean setsHeap(String jvmOption) {
        return jvmOption.startsWith("-Xmx") || jvmOption.startsWith("-Xms") || jvmOption.startsWith("-XX:MaxHeapSize") || jvmOption.startsWith("-XX:InitialHeapSize")
                || jvmOption.startsWith("-XX:MaxRAM") || jvmOption.startsWith("-XX:MinRAMPercentage") || jvmOption.startsWith("-XX:InitialRAMPercentage");
    }

    ObjectNode json(BenchSpec spec) {
        var o = new ObjectMapper().createObjectNode();
        o.put("model", spec.key());
        o.put("compare_prompt_tokens", promptTokens);
        o.put("compare_peak_rss_gb", compare.peakRss() / 1e9);
        o.put("compare_max_heap_used_gb", compare.maxHeapUsed() / 1e9);
        o.put("compare_heap_limit_gb", compare.heapLimit() / 1e9);
        o.put("compare_wall_s", compare.wallS());
        o.put("compare_cpu_s", compare.cpuS());
        o.put("compare_observer_check", observerCheck);
        o.put("compare_observer_effect", observerEffect);
        o.put("reference_gb", referenceBytes / 1e9);
        put(o.putObject("compare"), compare);
        if (dump != null) put(o.putObject("dump"), dump);
        return o;
    }

    private static void put(ObjectNode o, Usage u) {
        o.put("wall_s", u.wallS());
        o.put("cpu_s", u.cpuS());
        o.put("jvm_start_s", u.jvmStartS());
        o.put("load_average", u.loadAverage());
        var parts = o.putObject("parts");
        for (var p : u.parts()) {
            var e = parts.putObject(p.name());
            e.put("wall_s", p.wallS());
            e.put("cpu_s", p.cpuS());
            e.put("cpu_share", u.cpuS() > 0 ? p.cpuS() / u.cpuS() : 0);
        }
        o.put("peak_rss_gb", u.peakRss() / 1e9);
        o.put("max_heap_used_gb", u.maxHeapUsed() / 1e9);
        o.put("max_heap_live_after_gc_gb", u.maxHeapLive() / 1e9);
        o.put("heap_limit_gb", u.heapLimit() / 1e9);
        var p = o.putObject("sampled_peak_rss_gb");
        p.put("total", u.sampledPeakRss() / 1e9);
        p.put("checkpoint_pages", u.weightsRss() / 1e9);
        p.put("reference_pages", u.referenceRss() / 1e9);
        p.put("other_files", u.otherFilesRss() / 1e9);
        p.put("anonymous", u.anonymousRss() / 1e9);
        p.put("anonymous_on_huge_pages", u.anonymousHugeRss() / 1e9);
        p.put("heap_committed", u.heapCommittedAtPeak() / 1e9);
    }

    void print(BenchSpec spec, PrintWriter out) {
        out.println("decodiff bench " + (observerCheck ? "--compare-time" : "--compare-rss") + " — " + spec.describe());
        out.println(Fmt.format("live compare of a %,d-token prompt, %d steps, every point, against a %.2f GB reference (own JVM, default heap, %s):",
                promptTokens, STEPS, referenceBytes / 1e9, observerCheck ? "observer check on: " + observerEffect : "no observer check"));
        print(out, "compare", compare);
        printParts(out, compare);
        if (dump != null) print(out, "dump (making the reference)", dump);
    }

    private static void printParts(PrintWriter out, Usage u) {
        out.println(Fmt.format("  %-28s %7.1f s wall, %7.1f CPU-s (JVM start to main %.1f s; load average %s):", "where the time went", u.wallS(), u.cpuS(),
                u.jvmStartS(), u.loadAverage()));
        for (var p : u.parts())
            out.println(Fmt.format("    %-26s %7.1f s wall %7.1f CPU-s  %5.1f %% of the CPU time", p.name(), p.wallS(), p.cpuS(),
                    u.cpuS() > 0 ? 100 * p.cpuS() / u.cpuS() : 0));
    }

    private static void print(PrintWriter out, String what, Usage u) {
        out.println(Fmt.format("  %-28s peak RSS %6.2f GB, heap: max used %5.2f GB, max live after a GC %5.2f GB, limit %5.2f GB; %7.1f s, %7.1f CPU-s", what,
                u.peakRss() / 1e9, u.maxHeapUsed() / 1e9, u.maxHeapLive() / 1e9, u.heapLimit() / 1e9, u.wallS(), u.cpuS()));
        out.println(Fmt.format("  %-28s at the sampled peak (%5.2f GB): checkpoint pages %5.2f, reference pages %5.2f, other files %5.2f, anonymous %5.2f GB"
                + " (of which on huge pages, the engine's copy of the weights where it makes one, %5.2f; heap committed %5.2f)", "", u.sampledPeakRss() / 1e9,
                u.weightsRss() / 1e9, u.referenceRss() / 1e9, u.otherFilesRss() / 1e9, u.anonymousRss() / 1e9, u.anonymousHugeRss() / 1e9,
                u.heapCommittedAtPeak() / 1e9));
    }
}
