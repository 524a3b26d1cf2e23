package dev.decodiff.harness.cli;

import dev.decodiff.harness.SyntheticDump;
import dev.decodiff.harness.dump.DumpReader;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static dev.decodiff.harness.cli.CliTest.run;
import static org.assertj.core.api.Assertions.assertThat;

/** Options are checked before use; every command judged against a reference picks its tolerances by one rule. */
class CommandOptionsTest {
    @TempDir
    Path tmp;

    Path ref() { return SyntheticDump.write(tmp.resolve("ref"), SyntheticDump.NONE); }

    private static void assertUsageError(CliTest.Run r, String... fragments) {
        assertThat(r.code()).as(r.out() + r.err()).isEqualTo(2);
        assertThat(r.out()).doesNotContain("MATCH");
        assertThat(r.err().strip().lines().toList()).as(r.err()).hasSize(1);
        assertThat(r.err()).contains(fragments);
    }

    @Test
    void numericOptionsThatAreNotFiniteOrOutOfRangeAreRefused() {
        Path ref = ref();
        for (String bad : new String[]{"NaN", "Infinity", "-1"})
            assertUsageError(run("compare", ref.toString(), ref.toString(), "--near-tie", bad), "--near-tie must be a finite number ≥ 0, got");
        Path model = tmp.resolve("no-model");
        assertUsageError(run("run", "--model", model.toString(), "--tokens", "2", "--temperature", "NaN"), "--temperature must be a finite number");
        assertUsageError(run("run", "--model", model.toString(), "--tokens", "2", "--top-p", "NaN"), "--top-p must be a finite number");
        assertUsageError(run("run", "--model", model.toString(), "--tokens", "2", "--top-p", "1.5"), "--top-p must be a finite number in [0, 1]");
        assertUsageError(run("run", "--model", model.toString(), "--tokens", "2", "--top-k", "-3"), "--top-k must be ≥ 0");
        assertUsageError(run("calibrate", ref.toString(), ref.toString(), "--out", tmp.resolve("p.json").toString(), "--factor", "NaN"),
                "--factor must be a number ≥ 1");
    }

    @Test
    void noArgumentsListsEveryCommandAndIsAUsageError() {
        var r = run();
        assertThat(r.code()).isEqualTo(2);
        var names = Main.commandLine(new java.io.PrintWriter(new java.io.StringWriter()), new java.io.PrintWriter(new java.io.StringWriter()))
                .getSubcommands().keySet();
        assertThat(names).contains("compare", "dump", "bisect", "selfcheck", "kv-drift");
        for (String name : names) assertThat(r.err()).contains("  " + name);
    }

    @Test
    void helpKeepsEveryExampleOnOneLine() {
        var cl = Main.commandLine(new java.io.PrintWriter(new java.io.StringWriter()), new java.io.PrintWriter(new java.io.StringWriter()));
        for (var sub : cl.getSubcommands().entrySet()) {
            if (sub.getKey().equals("help")) continue;
            var r = run(sub.getKey(), "--help");
            assertThat(r.code()).isZero();
            var lines = r.out().lines().toList();
            for (String line : sub.getValue().getCommandSpec().usageMessage().footer())
                if (line.contains("decodiff ")) assertThat(lines).as(sub.getKey() + " --help").contains(line);
        }
    }

    @Test
    void noUserFacingTextCitesAnIssueNumberOrAnInternalDesignFile() {
        var cl = Main.commandLine(new java.io.PrintWriter(new java.io.StringWriter()), new java.io.PrintWriter(new java.io.StringWriter()));
        var all = new StringBuilder(run("--help").out());
        for (var name : cl.getSubcommands().keySet()) all.append(run(name, "--help").out());
        assertThat(all.toString()).doesNotContainPattern("(?i)issue\\s*#?\\d").doesNotContain("#1").doesNotContain("DESIGN.md");
    }

    @Test
    void theShippedDocsCiteNoIssueNumberAndNoInternalFile() throws Exception {
        Path root = Path.of("..").toAbsolutePath().normalize();
        var docs = new java.util.ArrayList<Path>(List.of(root.resolve("README.md")));
        try (var s = Files.list(root.resolve("docs"))) {
            docs.addAll(s.filter(p -> p.toString().endsWith(".md")).toList());
        }
        assertThat(docs).hasSizeGreaterThan(3);
        for (Path d : docs)
            assertThat(Files.readString(d)).as(d.toString()).doesNotContainPattern("(?i)\\bissue\\s*#?\\d")
                    .doesNotContain("DESIGN.md").doesNotContain("gemma4-spec.md");
    }

    @Test
    void aBfloat16ReferenceIsJudgedWithTheBf16ProfileByEveryReferenceCommand() throws Exception {
        Path ref = ref();
        Path mf = ref.resolve("manifest.json");
        Files.writeString(mf, Files.readString(mf).replace("\"float32\"", "\"bfloat16\""));
        var args = new ReferenceArgs();
        new CommandLine(args).parseArgs(ref.toString());
        assertThat(args.profile(DumpReader.open(ref)).source()).isEqualTo("built-in bf16 noise floor");
        var fp32 = new ReferenceArgs();
        Path ref32 = SyntheticDump.write(tmp.resolve("ref32"), SyntheticDump.NONE);
        new CommandLine(fp32).parseArgs(ref32.toString());
        assertThat(fp32.profile(DumpReader.open(ref32)).source()).isEqualTo("built-in fp32 defaults");
        // compare and bisect take their reference, model and tolerance from that one mixin
        for (Object cmd : new Object[]{new CompareCommand(), new BisectCommand()}) {
            var spec = new CommandLine(cmd).getCommandSpec();
            assertThat(spec.mixins().values()).anyMatch(m -> m.userObject() instanceof ReferenceArgs);
            assertThat(spec.mixins().values()).anyMatch(m -> m.userObject() instanceof OutputArgs);
        }
        // and a bf16 reference compared with itself says which profile judged it
        var r = run("compare", ref.toString(), ref.toString(), "--allow-mismatch");
        assertThat(r.out()).as(r.err()).contains("built-in bf16 noise floor");
    }
}
