package dev.decodiff.harness.bench;

import dev.decodiff.harness.cli.StartupCache;
import dev.decodiff.harness.report.Fmt;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;

/**
 * What a user pays for running decodiff once: a fresh JVM started with this process's own JVM options and class
 * path (under the launcher: the launcher's command line, its startup cache included) runs
 * {@code decodiff run --model <bench checkpoint> --tokens <the 512 prompt ids> -n 3 --ids --stats}, and this process,
 * long warmed up, prefills the same 512 tokens in a fresh session; one of each per round, so that load on the machine
 * hits both alike. Per round the one-shot prefill time over the warm one is the figure (1.0: no warm-up cost left);
 * the child's wall time, JVM start to exit, is reported beside it, and what of it is not prefill or decode (JVM start,
 * class loading, model load, exit).
 */
record OneShot(Figure prefillTps, Figure warmPrefillTps, Figure prefillTimeOverWarm, Figure wallS, Figure outsideS, boolean aotCache) {

    static final int NEW_TOKENS = 3;
    private static final Pattern STATS = Pattern.compile("prefill: (\\d+) tokens in ([0-9.]+)s .*decode: \\d+ tokens in ([0-9.]+)s");

    static OneShot measure(BenchSetup b) throws IOException {
        var jvm = jvmCommand();
        boolean aot = StartupCache.inUse(); // the child has the same options, so the same cache

        var cmd = new ArrayList<>(jvm);
        cmd.addAll(List.of("run", "--model", b.checkpoint().toString(), "--tokens", ids(b.prompt(BenchSetup.PREFILL)),
                "-n", Integer.toString(NEW_TOKENS), "--ids", "--stats"));
        int n = b.repeats();
        double[] oneShot = new double[n], warm = new double[n], ratio = new double[n], wall = new double[n], outside = new double[n];
        for (int r = 0; r < n; r++) {
            b.log().accept(Fmt.format("one-shot `decodiff run` (fresh JVM%s) against a warm prefill, round %d/%d…", aot ? ", startup cache" : "", r + 1, n));
            var child = runChild(cmd, b.work());
            long t0 = System.nanoTime();
            b.session().forward(b.prompt(BenchSetup.PREFILL));
            double warmS = BenchSetup.secondsSince(t0);
            oneShot[r] = BenchSetup.PREFILL / child.prefillS();
            warm[r] = BenchSetup.PREFILL / warmS;
            ratio[r] = child.prefillS() / warmS;
            wall[r] = child.wallS();
            outside[r] = child.wallS() - child.prefillS() - child.decodeS();
        }
        return new OneShot(Figure.of(oneShot), Figure.of(warm), Figure.of(ratio), Figure.of(wall), Figure.of(outside), aot);
    }

    /** The figures by their JSON key (the median at the top level, min/median/max under "figures"). */
    java.util.Map<String, Figure> figures() {
        var m = new java.util.LinkedHashMap<String, Figure>();
        m.put("one_shot_prefill_tokens_per_s", prefillTps);
        m.put("one_shot_warm_prefill_tokens_per_s", warmPrefillTps);
        m.put("one_shot_prefill_over_warm", prefillTimeOverWarm);
        m.put("one_shot_wall_s", wallS);
        m.put("one_shot_outside_prefill_s", outsideS);
        return m;
    }

    /** One child's wall time (start to exit) and the prefill and decode seconds it printed. */
    record Child(double wallS, double prefillS, double decodeS) {}

    private static Child runChild(List<String> cmd, Path work) throws IOException {
        Path err = work.resolve("one-shot.stderr");
        var pb = new ProcessBuilder(cmd).redirectOutput(ProcessBuilder.Redirect.DISCARD).redirectError(err.toFile());
        long t0 = System.nanoTime();
        var p = pb.start();
        int code;
        try {
            code = p.waitFor();
        } catch (InterruptedException e) {
            p.destroyForcibly();
            Thread.currentThread().interrupt();
            throw new IOException("interrupted while the one-shot run was running", e);
        }
        double wall = BenchSetup.secondsSince(t0);
        String text = Files.readString(err);
        var m = STATS.matcher(text);
        if (code != 0 || !m.find())
            throw new IllegalStateException("the one-shot `decodiff run` exited with " + code + " and no stats line; its stderr: " + text.strip());
        return new Child(wall, Double.parseDouble(m.group(2)), Double.parseDouble(m.group(3)));
    }

    /** This JVM's own command line up to the main class: the java binary, its options and class path, decodiff's main class. */
    static List<String> jvmCommand() {
        String java = ProcessHandle.current().info().command().orElse(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        var cmd = new ArrayList<String>();
        cmd.add(java);
        cmd.addAll(ManagementFactory.getRuntimeMXBean().getInputArguments());
        cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), "dev.decodiff.harness.cli.Main"));
        return cmd;
    }

    private static String ids(int[] tokens) {
        var sb = new StringBuilder();
        for (int t : tokens) sb.append(sb.isEmpty() ? "" : ",").append(t);
        return sb.toString();
    }
}
