package dev.decodiff.harness.cli;

import dev.decodiff.harness.Home;
import dev.decodiff.harness.report.Terminal;
import dev.decodiff.harness.selftest.SelfTest;
import dev.decodiff.harness.selftest.SelfTestReport;
import picocli.CommandLine.Command;

import java.util.concurrent.Callable;

@Command(name = "selftest", mixinStandardHelpOptions = true,
        description = {"Judges decodiff on itself: is every catalog fault localized where the math says, with no false alarm?",
                "Every catalog fault on every bundled checkpoint and fp32 reference case where it applies must be localized by compare and bisect to the cell fixed from the math (docs/faults.md), clean runs must raise no alarm,",
                "and selfcheck must catch the faults it is required to catch without a reference. Qwen3.5's catalog runs on the bundled Qwen checkpoints,",
                "the Llama family's on llama-tiny and qwen3-tiny: each fault localized at its catalog cell and named by bisect's replay. Prints the accuracy tables."},
        footer = {"", "Exit codes: 0 everything localized and no false alarm, 1 otherwise, 2 bad input."})
final class SelfTestCommand implements Callable<Integer> {
    @picocli.CommandLine.Mixin
    JsonOption json = new JsonOption();

    @picocli.CommandLine.Spec
    picocli.CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() {
        var err = spec.commandLine().getErr();
        boolean tty = Terminal.progressOnStderr();
        var result = new SelfTest().run(Home.get(), what -> {
            if (tty) {
                err.print("\r\u001b[2Kselftest: " + what);
                err.flush();
            }
        });
        if (tty) {
            err.print("\r\u001b[2K");
            err.flush();
        }
        var out = spec.commandLine().getOut();
        if (json.on()) out.println(SelfTestReport.json(result));
        else out.print(SelfTestReport.terminal(result, Terminal.colourStdout()));
        out.flush();
        return result.passed() ? Main.MATCH : Main.DIVERGENCE;
    }
}
