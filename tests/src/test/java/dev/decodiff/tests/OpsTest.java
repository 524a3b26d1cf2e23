package dev.decodiff.tests;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * `decodiff ops`: every metal kernel against ND4J, the independent oracle; and ND4J stays off every other path. Runs
 * the CLI as the launcher does (a fresh JVM on harness/target/harness-*.jar + harness/target/lib/*), with
 * -verbose:class to see which classes a command loads.
 */
class OpsTest {
    static Path root, jar, lib;

    @BeforeAll
    static void launcherLayout() {
        root = ReferenceCases.repoRoot();
        jar = root.resolve("harness/target/harness-0.1.0-SNAPSHOT.jar");
        lib = root.resolve("harness/target/lib");
        assertThat(jar).as("the harness jar (mvn package builds it before this module's tests)").isRegularFile();
        assertThat(lib.resolve("nd4j-native-1.0.0-M2.1-linux-x86_64.jar")).as("ND4J's natives in the launcher's lib/").isRegularFile();
    }

    record Run(int code, String out, String err) {
        List<String> loadedNd4j() {
            return (out + "\n" + err).lines().filter(l -> l.contains("[class,load]") && l.contains(" org.nd4j.")).toList();
        }

        @Override
        public String toString() {
            String e = err.lines().filter(l -> !l.contains("[class,load]")).reduce("", (a, b) -> a + b + "\n");
            return "exit " + code + "\n--- stdout\n" + out.lines().filter(l -> !l.contains("[class,load]")).reduce("", (a, b) -> a + b + "\n") + "--- stderr\n" + e;
        }
    }

    /** The CLI in a fresh JVM, with the launcher's flags and the given classpath. */
    static Run cli(String classpath, String... args) throws Exception {
        var cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--add-modules", "jdk.incubator.vector", "--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow",
                "-Xlog:class+load=info:stderr", "-Ddecodiff.home=" + root, "-cp", classpath, "dev.decodiff.harness.cli.Main"));
        cmd.addAll(List.of(args));
        Path out = Files.createTempFile("decodiff-ops", ".out"), err = Files.createTempFile("decodiff-ops", ".err");
        try {
            int code = new ProcessBuilder(cmd).directory(root.toFile()).redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")))
                    .redirectOutput(out.toFile()).redirectError(err.toFile()).start().waitFor();
            return new Run(code, Files.readString(out), Files.readString(err));
        } finally {
            Files.deleteIfExists(out);
            Files.deleteIfExists(err);
        }
    }

    static String launcherClasspath() { return jar + ":" + lib + "/*"; }

    @Test
    void everyKernelMatchesTheOracleAndOnlyOpsLoadsNd4j() throws Exception {
        var r = cli(launcherClasspath(), "ops", "--json");
        assertThat(r.code()).as(r.toString()).isZero();
        JsonNode j = new ObjectMapper().readTree(r.out());
        assertThat(j.get("verdict").asText()).isEqualTo("pass");
        assertThat(j.get("oracle").asText()).startsWith("ND4J 1.0.0-M2.1");
        var ops = new ArrayList<String>();
        for (JsonNode o : j.get("ops")) {
            assertThat(o.get("passed").asBoolean()).as(o.toString()).isTrue();
            assertThat(o.get("nmse").asDouble()).as(o.toString()).isLessThanOrEqualTo(o.get("threshold").asDouble());
            ops.add(o.get("op").asText());
        }
        assertThat(ops).contains("matvec", "matmul", "rmsnorm", "rope", "softmax", "attention", "gelu");
        assertThat(j.get("ops")).hasSizeGreaterThanOrEqualTo(18);
        assertThat(r.loadedNd4j()).as("ops does load ND4J (the check below sees it when it happens)").isNotEmpty();
    }

    @Test
    void theRestOfTheCliNeverLoadsNd4j() throws Exception {
        for (String[] args : List.of(new String[]{"--help"}, new String[]{"compare", "--help"}, new String[]{"ops", "--help"},
                new String[]{"compare", "reference-dumps/gemma4-tiny/short", "reference-dumps/gemma4-tiny/short", "--json"},
                new String[]{"run", "--model", "checkpoints/gemma4-tiny", "--prompt", "Cotton denim is", "-n", "3"})) {
            var r = cli(launcherClasspath(), args);
            assertThat(r.code()).as(String.join(" ", args) + "\n" + r).isZero();
            assertThat(r.err()).as("class-load logging is on").contains("[class,load]");
            assertThat(r.loadedNd4j()).as(String.join(" ", args) + " loads no org.nd4j class").isEmpty();
        }
    }

    @Test
    void withoutNd4jsNativeLibraryOpsExitsTwoWithAClearMessage() throws Exception {
        List<String> jars;
        try (Stream<Path> s = Files.list(lib)) {
            jars = s.map(Path::toString).filter(n -> n.endsWith(".jar") && !n.endsWith("/nd4j-native-1.0.0-M2.1-linux-x86_64.jar")).sorted().toList();
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
        var cp = jar + ":" + String.join(":", jars);
        var r = cli(cp, "ops");
        assertThat(r.code()).as(r.toString()).isEqualTo(2);
        assertThat(r.err()).contains("decodiff: ND4J, the oracle of `decodiff ops`, could not be loaded")
                .contains("UnsatisfiedLinkError").contains("nd4j-native");
        assertThat(r.out()).isEmpty();
        var ok = cli(cp, "compare", "reference-dumps/gemma4-tiny/short", "reference-dumps/gemma4-tiny/short");
        assertThat(ok.code()).as("the rest of the CLI works without ND4J at all\n" + ok).isZero();
    }

    @Test
    void aKernelErrorOfBf16SizeFailsTheCheck() throws Exception {
        var r = Cli.run("ops", "--op", "rope", "--op", "softmax", "--op", "matvec", "--perturb", "rope=1e-3", "--perturb", "softmax=1e-3");
        assertThat(r.code()).as(r.toString()).isEqualTo(1);
        assertThat(r.out()).contains("FAIL: 4 of").contains("rope default").contains("softmax x[8,4096]");
        assertThat(r.out().lines().filter(l -> l.startsWith("matvec")).allMatch(l -> l.endsWith("ok"))).isTrue();
        var bad = Cli.run("ops", "--perturb", "conv2d=1e-3");
        assertThat(bad.code()).isEqualTo(2);
        assertThat(bad.err()).contains("unknown op 'conv2d'");
    }
}
