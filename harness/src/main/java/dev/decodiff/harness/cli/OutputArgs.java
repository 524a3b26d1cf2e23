package dev.decodiff.harness.cli;

import dev.decodiff.harness.OutputPaths;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;

import java.nio.file.Path;
import java.util.function.Supplier;

/**
 * How a command delivers its result (picocli mixin): the terminal report, or JSON on stdout (--json), and
 * optionally one self-contained HTML page (--html FILE), written atomically.
 */
public final class OutputArgs {
    @Mixin
    JsonOption jsonOption = new JsonOption();

    @Option(names = "--html", paramLabel = "FILE", description = "Also write a self-contained HTML report to FILE.")
    Path html;

    public boolean json() { return jsonOption.on(); }

    /** Refuses an --html path that would replace something the user has, before any work is done. */
    public void checkTargets(Path... inputs) {
        if (html == null) return;
        OutputPaths.refuseOverlap("--html", html, inputs);
        HtmlFile.checkTarget(html);
    }

    /** Prints JSON or the terminal text on stdout, then writes the HTML page if asked. */
    public void deliver(CommandSpec spec, Supplier<String> jsonText, Supplier<String> terminalText, Supplier<String> page) {
        var out = spec.commandLine().getOut();
        if (json()) out.println(jsonText.get());
        else out.print(terminalText.get());
        out.flush();
        if (html != null) HtmlFile.write(html, page.get(), spec, json());
    }
}
