package dev.decodiff.harness.cli;

import dev.decodiff.harness.BadInputException;
import picocli.CommandLine.Model.CommandSpec;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Writes a report page for --html, creating its folder, and says where on stderr (unless stdout carries JSON).
 * The page goes to a temporary file that is moved into place, so a failed write leaves the old file or none.
 * An existing file is replaced only when it is an earlier decodiff report: anything else the user had stays.
 */
final class HtmlFile {
    private HtmlFile() {}

    /** Called before any work, so a refused path costs nothing. */
    static void checkTarget(Path html) {
        if (html != null && Files.exists(html) && !isDecodiffReport(html))
            throw new BadInputException(html, "exists and is not a decodiff report; choose another --html path or remove it first");
    }

    static void write(Path html, String page, CommandSpec spec, boolean quiet) {
        checkTarget(html);
        AtomicFile.write(html, page, "the HTML report");
        if (!quiet) {
            spec.commandLine().getErr().println("decodiff: HTML report written to " + html);
            spec.commandLine().getErr().flush();
        }
    }

    private static boolean isDecodiffReport(Path file) {
        try {
            if (!Files.isRegularFile(file)) return false;
            String head = new String(Files.readAllBytes(file), 0, (int) Math.min(600, Files.size(file)), java.nio.charset.StandardCharsets.UTF_8);
            return head.startsWith("<!DOCTYPE html>") && head.contains("<title>decodiff");
        } catch (IOException e) {
            return false;
        }
    }
}
