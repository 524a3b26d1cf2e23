package dev.decodiff.harness.cli;

import dev.decodiff.harness.report.Fmt;
import picocli.CommandLine;

/**
 * Renders every command's help footer so that examples stay copy-pastable: a line holding a command line
 * ("decodiff …") is printed as written, never broken; prose lines are wrapped at the help width.
 */
final class HelpFooter implements CommandLine.IHelpSectionRenderer {
    static void installOn(CommandLine cl) {
        cl.getHelpSectionMap().put(CommandLine.Model.UsageMessageSpec.SECTION_KEY_FOOTER, new HelpFooter());
        for (var sub : cl.getSubcommands().values()) installOn(sub);
    }

    @Override
    public String render(CommandLine.Help help) {
        var sb = new StringBuilder();
        int width = help.commandSpec().usageMessage().width();
        for (String line : help.commandSpec().usageMessage().footer()) {
            if (line.isEmpty() || line.contains("decodiff ")) sb.append(line).append("\n");
            else sb.append(Fmt.wrap(line, width, "").stripLeading()).append("\n");
        }
        return sb.toString();
    }
}
