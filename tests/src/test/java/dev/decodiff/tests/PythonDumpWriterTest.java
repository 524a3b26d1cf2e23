package dev.decodiff.tests;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * python/decodiff_dump.py, the writer for engines outside the JVM, run as README's "Judging your own engine" shows:
 * the plan of the bundled reference, decodiff's own engine's tensors standing in for another engine's, rewritten
 * through the writer, compared with transformers' reference — MATCH. And a wrong shape is refused as it is put.
 */
class PythonDumpWriterTest {
    private static final Path ROOT = ReferenceCases.repoRoot();
    private static final String REF = ROOT.resolve("reference-dumps/gemma4-tiny/long").toString();

    @TempDir
    Path tmp;

    @BeforeAll
    static void pythonWithNumpy() throws Exception {
        Python r;
        try {
            r = python(Path.of("."), "-c", "import numpy");
        } catch (IOException e) {
            r = null;
        }
        assumeTrue(r != null && r.code == 0, "skipped: python3 with NumPy is not installed (the dump writer's only dependencies; Debian: python3-numpy)");
    }

    private record Python(int code, String out) {}

    private static Python python(Path dir, String... args) throws IOException, InterruptedException {
        var cmd = new ArrayList<>(List.of("python3"));
        cmd.addAll(List.of(args));
        var p = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        assertThat(p.waitFor(120, TimeUnit.SECONDS)).isTrue();
        return new Python(p.exitValue(), out);
    }

    private Path planJson() throws IOException {
        var plan = Cli.run("plan", REF, "--json");
        assertThat(plan.code()).as(plan.toString()).isZero();
        Path f = tmp.resolve("plan.json");
        Files.writeString(f, plan.out());
        return f;
    }

    /**
     * README's walk-through, line by line as a newcomer types it: decodiff's commands run in-process, python3 as a
     * process, /tmp and plan.json moved into a temporary folder. The last line must say MATCH.
     */
    @Test
    void theReadmeWalkThroughWritesADumpFromPythonThatMatchesTransformers() throws Exception {
        var lines = readmeWalkThrough();
        assertThat(lines).hasSize(4);
        Cli last = null;
        for (String line : lines) {
            String cmd = line.replaceAll("\\s+#.*$", "").replace("/tmp/", tmp + "/").replace("plan.json", tmp.resolve("plan.json").toString());
            var words = new ArrayList<>(List.of(cmd.trim().split("\\s+")));
            Path redirect = null;
            if (words.size() > 2 && words.get(words.size() - 2).equals(">")) {
                redirect = Path.of(words.removeLast());
                words.removeLast();
            }
            if (words.getFirst().equals("python3")) {
                var r = python(ROOT, words.subList(1, words.size()).toArray(String[]::new));
                assertThat(r.code()).as(line + "\n" + r.out()).isZero();
                continue;
            }
            assertThat(words.getFirst()).isEqualTo("./decodiff");
            var args = words.subList(1, words.size()).stream().map(w -> Files.exists(ROOT.resolve(w)) ? ROOT.resolve(w).toString() : w).toArray(String[]::new);
            last = Cli.run(args);
            assertThat(last.code()).as(line + "\n" + last).isZero();
            if (redirect != null) Files.writeString(redirect, last.out());
        }
        assertThat(last.out()).contains("MATCH");
        var j = Cli.run("compare", REF, tmp.resolve("mine").toString(), "--json").json();
        assertThat(j.get("verdict").asText()).isEqualTo("match");
        assertThat(j.get("producers").toString()).contains("rewrite_dump.py");
    }

    /** The command lines of README's fenced block that runs python/examples/rewrite_dump.py. */
    private static List<String> readmeWalkThrough() throws IOException {
        var blocks = Files.readString(ROOT.resolve("README.md")).split("```");
        for (int i = 1; i < blocks.length; i += 2)
            if (blocks[i].contains("python/examples/rewrite_dump.py"))
                return blocks[i].lines().skip(1).filter(l -> !l.isBlank()).toList();
        throw new AssertionError("README.md has no block that runs python/examples/rewrite_dump.py");
    }

    @Test
    void aWrongShapeIsRefusedNamingThePointAndTheShapeThePlanExpects() throws Exception {
        Path plan = planJson();
        String script = """
                import importlib.util, sys, numpy as np
                spec = importlib.util.spec_from_file_location("dd", sys.argv[1]); dd = importlib.util.module_from_spec(spec); spec.loader.exec_module(dd)
                plan = dd.Plan.load(sys.argv[2])
                with dd.DumpWriter(sys.argv[3], plan, producer={"name": "t"}) as w:
                    w.begin_step()
                    w.put("embed", np.zeros((23, 128), np.float32))
                    w.put("layers.0.attn.q", np.zeros((4, 23, 32), np.float32))   # [heads, T, d]
                """;
        Path py = tmp.resolve("wrong.py");
        Files.writeString(py, script);
        Path out = tmp.resolve("wrong");
        var r = python(tmp, py.toString(), ROOT.resolve("python/decodiff_dump.py").toString(), plan.toString(), out.toString());
        assertThat(r.code()).isNotZero();
        assertThat(r.out()).contains("PlanError: layers.0.attn.q: shape [4, 23, 32], but the plan expects [T, heads, head_dim] = [23, 4, 32]")
                .contains("swap the first two axes");
        // the writer stopped before a step was written and never marked the dump: compare says incomplete, not match
        assertThat(out.resolve("step-0000.safetensors")).doesNotExist();
        var cmp = Cli.run("compare", REF, out.toString());
        assertThat(cmp.code()).as(cmp.toString()).isNotZero();
    }
}
