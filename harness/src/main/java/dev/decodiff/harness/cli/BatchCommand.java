package dev.decodiff.harness.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.decodiff.harness.BadInputException;
import picocli.CommandLine;
import picocli.CommandLine.Command;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;

/**
 * Runs many decodiff commands in one JVM: a corpus of hundreds of small comparisons is dominated by starting a JVM
 * and loading the kernels, not by comparing. Each line of the input is one command as a JSON array of its arguments;
 * each result is one JSON line (index, exit code, stdout, the end of stderr), written and flushed as it finishes.
 */
@Command(name = "batch", mixinStandardHelpOptions = true,
        description = {"Runs many decodiff commands in one process, one per line of COMMANDS (a JSON array of arguments, e.g."
                + " [\"compare\", \"REF\", \"CAND\", \"--json\"]), and writes one JSON line per command to --out:"
                + " {\"index\", \"exit\", \"stdout\", \"stderr\"}. Used by scripts/corpus-rates.py."},
        footer = {"", "Exit codes: 0 when every command ran (whatever each one's own exit code), 2 bad input or usage."})
final class BatchCommand implements Callable<Integer> {
    private static final ObjectMapper JSON = new ObjectMapper();

    @CommandLine.Parameters(index = "0", paramLabel = "COMMANDS", description = "A file of commands, one JSON array of arguments per line.")
    Path commands;

    @CommandLine.Option(names = "--out", required = true, paramLabel = "FILE", description = "Where the results go, one JSON line per command (never overwritten without --force).")
    Path out;

    @CommandLine.Option(names = "--force", description = "Overwrite --out if it exists.")
    boolean force;

    @Override
    public Integer call() throws IOException {
        if (!Files.isRegularFile(commands)) throw new BadInputException(commands, "is not a file; give a file of commands, one JSON array per line");
        if (Files.exists(out) && !force) throw new BadInputException(out, "exists; pass --force to overwrite it, or choose another --out");
        var lines = new ArrayList<List<String>>();
        int n = 0;
        for (String line : Files.readAllLines(commands, StandardCharsets.UTF_8)) {
            n++;
            if (line.isBlank()) continue;
            try {
                var node = JSON.readTree(line);
                if (!node.isArray()) throw new IOException("not an array");
                var args = new ArrayList<String>();
                node.forEach(a -> args.add(a.asText()));
                if (args.isEmpty() || args.get(0).equals("batch")) throw new IOException("an empty command or a nested batch");
                lines.add(args);
            } catch (IOException e) {
                throw new BadInputException(commands, "line " + n + " is not a JSON array of a command's arguments (" + e.getMessage()
                        + "); write one array per line, e.g. [\"compare\", \"REF\", \"CAND\", \"--json\"]");
            }
        }
        try (var w = Files.newBufferedWriter(out, StandardCharsets.UTF_8)) {
            for (int i = 0; i < lines.size(); i++) {
                var so = new StringWriter();
                var se = new StringWriter();
                int code = Main.commandLine(new PrintWriter(so, true), new PrintWriter(se, true)).execute(lines.get(i).toArray(String[]::new));
                ObjectNode r = JSON.createObjectNode();
                r.put("index", i);
                r.put("exit", code);
                r.put("stdout", so.toString());
                String err = se.toString();
                r.put("stderr", err.length() > 2000 ? err.substring(err.length() - 2000) : err);
                w.write(JSON.writeValueAsString(r));
                w.newLine();
                w.flush();
            }
        }
        return 0;
    }
}
