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

    @Test
    void aDumpWrittenByThePythonWriterMatchesTransformers() throws Exception {
        Path plan = planJson();
        Path engine = tmp.resolve("engine"), mine = tmp.resolve("mine");
        var dump = Cli.run("dump", "--model", ROOT.resolve("checkpoints/gemma4-tiny").toString(), "--reference", REF, "--out", engine.toString());
        assertThat(dump.code()).as(dump.toString()).isZero();

        var w = python(ROOT, "python/examples/rewrite_dump.py", engine.toString(), plan.toString(), mine.toString());
        assertThat(w.code()).as(w.out()).isZero();

        assertThat(Cli.run("validate", mine.toString()).code()).isZero();
        var cmp = Cli.run("compare", REF, mine.toString(), "--json");
        assertThat(cmp.code()).as(cmp.toString()).isZero();
        var j = cmp.json();
        assertThat(j.get("verdict").asText()).isEqualTo("match");
        assertThat(j.get("producers").toString()).contains("rewrite_dump.py");
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
