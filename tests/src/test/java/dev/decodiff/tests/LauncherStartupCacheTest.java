package dev.decodiff.tests;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The launcher's startup cache (scripts/startup-cache.sh, the JDK's AOT cache): made once from the jars, made again
 * when a jar or the JVM options change, never made by a JDK that cannot, and a cache the JVM cannot use — missing, garbage, empty, made
 * from other jars — costs a run nothing but the speed-up: same exit code, same stdout, nothing more on stderr than the
 * JVM's incubator notice that the launcher drops. The jars are copies of decodiff's own (the large ND4J ones, which
 * `--version` does not load, left out), so that touching one leaves the build alone.
 */
class LauncherStartupCacheTest {
    private static final String NOTICE = "WARNING: Using incubator modules: jdk.incubator.vector";
    private static final List<String> JVM = List.of("--add-modules", "jdk.incubator.vector", "--enable-native-access=ALL-UNNAMED");
    private static final String MAIN = "dev.decodiff.harness.cli.Main";

    @TempDir
    static Path jars;
    private static String classpath;

    @BeforeAll
    static void copyTheJars() throws IOException {
        var target = ReferenceCases.repoRoot().resolve("harness/target");
        Files.createDirectories(jars.resolve("lib"));
        try (var s = Files.list(target)) {
            for (var j : s.filter(p -> p.getFileName().toString().matches("harness-.*\\.jar")).toList()) Files.copy(j, jars.resolve("harness.jar"));
        }
        assertThat(jars.resolve("harness.jar")).as("the packaged harness jar (mvn package)").isRegularFile();
        try (var s = Files.list(target.resolve("lib"))) {
            for (var j : s.toList())
                if (Files.size(j) < 8 << 20) Files.copy(j, jars.resolve("lib").resolve(j.getFileName()));
        }
        classpath = jars.resolve("harness.jar") + ":" + jars.resolve("lib") + "/*";
    }

    record Result(int code, String out, String err) {}

    private static Result run(List<String> cmd, Path javaHome) throws Exception {
        var pb = new ProcessBuilder(cmd);
        pb.environment().put("JAVA_HOME", javaHome.toString());
        pb.environment().remove("JAVA_TOOL_OPTIONS");
        var p = pb.start();
        p.getOutputStream().close();
        var out = p.getInputStream().readAllBytes();
        var err = p.getErrorStream().readAllBytes();
        assertThat(p.waitFor(300, TimeUnit.SECONDS)).isTrue();
        return new Result(p.exitValue(), new String(out, StandardCharsets.UTF_8), new String(err, StandardCharsets.UTF_8));
    }

    private static Path javaHome() { return Path.of(System.getProperty("java.home")); }

    /** {@code startup_cache_option CACHE CLASSPATH <JVM options> Main --version}, as the launcher calls it, in bash. */
    private static Result option(Path cache, Path javaHome) throws Exception { return option(cache, javaHome, List.of()); }

    /** The same with more JVM options after the launcher's. */
    private static Result option(Path cache, Path javaHome, List<String> more) throws Exception {
        var script = ReferenceCases.repoRoot().resolve("scripts/startup-cache.sh");
        var cmd = new ArrayList<>(List.of("bash", "-c", ". \"$0\"; startup_cache_option \"$@\"", script.toString(), cache.toString(), classpath));
        cmd.addAll(JVM);
        cmd.addAll(more);
        cmd.addAll(List.of(MAIN, "--version"));
        return run(cmd, javaHome);
    }

    /** decodiff --version in a JVM given this cache the way the launcher gives it (null: no cache option at all). */
    private static Result version(String aotOption) throws Exception {
        var cmd = new ArrayList<>(List.of(javaHome().resolve("bin/java").toString()));
        cmd.addAll(JVM);
        if (aotOption != null) cmd.addAll(List.of(aotOption, "-Xlog:aot=off", "-Xlog:cds=off"));
        cmd.addAll(List.of("-cp", classpath, MAIN, "--version"));
        return run(cmd, javaHome());
    }

    /** stderr as the launcher shows it: without the JVM's incubator notice. */
    private static String shown(String err) { return err.replace(NOTICE + "\n", ""); }

    /** --version's lines but its startup-cache line, which says how the JVM started. */
    private static String rest(String out) { return out.replaceAll("(?m)^startup cache: .*\n", ""); }

    private static String cacheLine(String out) {
        return out.lines().filter(l -> l.startsWith("startup cache: ")).findFirst().orElseThrow(() -> new AssertionError("no startup cache line in " + out));
    }

    @Test
    void theCacheIsMadeOnceUsedAndMadeAgainWhenAJarChanges(@TempDir Path dir) throws Exception {
        Path cache = dir.resolve("decodiff.aot");
        var first = option(cache, javaHome());
        assertThat(first.code()).isZero();
        assertThat(first.out().strip()).isEqualTo("-XX:AOTCache=" + cache);
        assertThat(first.err()).contains("making the JVM's startup cache");
        assertThat(cache).isRegularFile();
        assertThat(Files.size(cache)).isPositive();
        FileTime made = Files.getLastModifiedTime(cache);

        var again = option(cache, javaHome());
        assertThat(again.out().strip()).isEqualTo("-XX:AOTCache=" + cache);
        assertThat(again.err()).as("nothing to make: the jars did not change").isEmpty();
        assertThat(Files.getLastModifiedTime(cache)).isEqualTo(made);

        var plain = version(null);
        var cached = version(again.out().strip());
        assertThat(plain.code()).isZero();
        assertThat(cached.code()).isZero();
        assertThat(rest(cached.out())).isEqualTo(rest(plain.out())).contains("decodiff ");
        assertThat(shown(cached.err())).isEmpty();
        // the JVM mapped the cache (class sharing on), and --version says so
        assertThat(cacheLine(cached.out())).isEqualTo("startup cache: in use (" + cache + ")");
        assertThat(cacheLine(plain.out())).startsWith("startup cache: none");

        // a jar rebuilt: the cache no longer matches it, so the next start makes it again
        Path jar = jars.resolve("harness.jar");
        Files.setLastModifiedTime(jar, FileTime.fromMillis(Files.getLastModifiedTime(cache).toMillis() + 10_000));
        var remade = option(cache, javaHome());
        assertThat(remade.err()).contains("making the JVM's startup cache");
        assertThat(remade.out().strip()).isEqualTo("-XX:AOTCache=" + cache);
        assertThat(Files.getLastModifiedTime(cache)).isNotEqualTo(made);
        var afterRemade = version(remade.out().strip());
        assertThat(shown(afterRemade.err())).isEmpty();
        assertThat(cacheLine(afterRemade.out())).isEqualTo("startup cache: in use (" + cache + ")");

        // the launcher's JVM options changed: the cache is made again under them, once (the jar back in the past first,
        // so that only the options differ)
        Files.setLastModifiedTime(jar, FileTime.fromMillis(System.currentTimeMillis() - 3_600_000));
        assertThat(option(cache, javaHome()).err()).as("the jars as they were").isEmpty();
        FileTime before = Files.getLastModifiedTime(cache);
        var otherOptions = option(cache, javaHome(), List.of("-XX:MaxNewSize=96m"));
        assertThat(otherOptions.err()).contains("making the JVM's startup cache");
        assertThat(otherOptions.out().strip()).isEqualTo("-XX:AOTCache=" + cache);
        assertThat(Files.getLastModifiedTime(cache)).isNotEqualTo(before);
        assertThat(option(cache, javaHome(), List.of("-XX:MaxNewSize=96m")).err()).as("the same options again: nothing to make").isEmpty();
        try (var s = Files.list(dir)) {
            assertThat(s.map(p -> p.getFileName().toString())).as("no temporary files left").noneMatch(n -> n.contains(".tmp"));
        }
    }

    @Test
    void aCacheTheJvmCannotUseCostsTheRunNothingButTheSpeedUp(@TempDir Path dir) throws Exception {
        var plain = version(null);
        assertThat(plain.code()).isZero();

        Path garbage = Files.writeString(dir.resolve("garbage.aot"), "not an AOT cache\n".repeat(100));
        Path empty = Files.createFile(dir.resolve("empty.aot"));
        // a cache made from these jars, then one of them rebuilt: the JVM refuses the stale cache
        Path stale = dir.resolve("stale.aot");
        assertThat(option(stale, javaHome()).out().strip()).isEqualTo("-XX:AOTCache=" + stale);
        Path jar = jars.resolve("lib").resolve("picocli-4.7.7.jar");
        FileTime was = Files.getLastModifiedTime(jar);
        Files.setLastModifiedTime(jar, FileTime.fromMillis(was.toMillis() + 5_000));
        try {
            for (Path cache : List.of(dir.resolve("missing.aot"), garbage, empty, stale)) {
                var r = version("-XX:AOTCache=" + cache);
                assertThat(r.code()).as("exit code with %s", cache.getFileName()).isZero();
                assertThat(rest(r.out())).as("stdout with %s", cache.getFileName()).isEqualTo(rest(plain.out()));
                assertThat(shown(r.err())).as("stderr with %s", cache.getFileName()).isEmpty();
                assertThat(cacheLine(r.out())).startsWith("startup cache: " + cache + " not used (");
            }
        } finally {
            Files.setLastModifiedTime(jar, was);
        }
    }

    @Test
    void aJdkThatCannotMakeTheCacheGetsNoneAndIsNotAskedAgain(@TempDir Path dir) throws Exception {
        // a JDK whose java does not know the option, as an older or a CDS-less build answers it
        Path home = dir.resolve("jdk");
        Files.createDirectories(home.resolve("bin"));
        Files.writeString(home.resolve("release"), "JAVA_VERSION=\"25\"\nJAVA_RUNTIME_VERSION=\"25+0-fake\"\n");
        Path calls = dir.resolve("calls");
        Path java = Files.writeString(home.resolve("bin/java"), """
                #!/bin/sh
                echo "$@" >> '%s'
                echo "Unrecognized VM option '${1#-XX:}'" >&2
                echo "Error: Could not create the Java Virtual Machine." >&2
                exit 1
                """.formatted(calls));
        assertThat(java.toFile().setExecutable(true)).isTrue();
        Path cache = dir.resolve("decodiff.aot");
        var first = option(cache, home);
        assertThat(first.code()).isZero();
        assertThat(first.out()).as("no cache option for the run").isEmpty();
        assertThat(cache).doesNotExist();
        var second = option(cache, home);
        assertThat(second.out()).isEmpty();
        assertThat(second.err()).as("not tried again until the jars or the JDK change").isEmpty();
        assertThat(Files.readAllLines(calls)).hasSize(1);
        try (var s = Files.list(dir)) {
            assertThat(s.map(p -> p.getFileName().toString())).noneMatch(n -> n.contains(".tmp"));
        }
    }
}
