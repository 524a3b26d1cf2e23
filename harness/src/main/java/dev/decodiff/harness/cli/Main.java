package dev.decodiff.harness.cli;

import dev.decodiff.engine.CheckpointException;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.compare.ComparisonResult;
import dev.decodiff.metal.SafetensorsException;
import picocli.CommandLine;
import picocli.CommandLine.Command;

import java.io.PrintWriter;
import java.io.UncheckedIOException;

/**
 * decodiff's command line. Exit codes: 0 match or precision (or success), 1 divergence, 2 bad input or usage, 3 incomplete,
 * 4 the reference disagrees with decodiff's description of the model.
 * Every bad-input error is one line naming the file and what to do.
 */
@Command(name = "decodiff", mixinStandardHelpOptions = true, versionProvider = Main.Version.class,
        description = "Finds where an LLM engine's decode goes wrong: which step, layer and tensor, and why.",
        subcommands = {CompareCommand.class, DumpCommand.class, RunCommand.class, InspectCommand.class, ValidateCommand.class, PlanCommand.class, GgufCommand.class, SelfTestCommand.class, SelfCheckCommand.class, SweepCommand.class, BisectCommand.class, OpsCommand.class, CalibrateCommand.class, KvDriftCommand.class, dev.decodiff.harness.bench.BenchCommand.class, BatchCommand.class, CommandLine.HelpCommand.class},
        footer = {"", "Exit codes: 0 match or precision, 1 divergence, 2 bad input, usage, or an output that could not be written, 3 incomplete (not every expected cell was compared), 4 the reference disagrees with decodiff's description of the model (its own ops, recomputed from its own inputs, are not reproduced).",
                "Start with: decodiff compare   (the bundled default case against the live engine)"})
public final class Main implements Runnable {
    public static final int MATCH = ComparisonResult.EXIT_MATCH, DIVERGENCE = ComparisonResult.EXIT_DIVERGENCE, BAD_INPUT = 2,
            INCOMPLETE = ComparisonResult.EXIT_INCOMPLETE, REFERENCE_DISAGREES = ComparisonResult.EXIT_REFERENCE_DISAGREES;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    /** No command given: list them all (on stderr, since nothing was done) and exit as a usage error. */
    @Override
    public void run() {
        var err = spec.commandLine().getErr();
        err.println("decodiff: which command? (decodiff COMMAND --help for one command's options)");
        spec.commandLine().usage(err);
        err.flush();
        throw new NoCommand();
    }

    /** Signals "usage printed, exit 2" without a second message. */
    private static final class NoCommand extends RuntimeException {
        NoCommand() { super(null, null, false, false); }
    }

    public static void main(String[] args) {
        System.exit(execute(args));
    }

    /**
     * Runs the CLI on the process's stdout and stderr and returns the exit code. stdout is written through a
     * stream that reports errors (System.out swallows them), so a full disk or a closed pipe is seen.
     */
    public static int execute(String... args) {
        var out = new PrintWriter(new java.io.OutputStreamWriter(new java.io.FileOutputStream(java.io.FileDescriptor.out), System.out.charset()), true);
        return commandLine(out, new PrintWriter(System.err, true)).execute(args);
    }

    public static CommandLine commandLine(PrintWriter out, PrintWriter err) {
        var cl = new CommandLine(new Main());
        cl.setOut(out);
        cl.setErr(err);
        HelpFooter.installOn(cl);
        // A result that could not be written is not delivered: say so and fail, whatever the verdict was.
        cl.setExecutionStrategy(parseResult -> {
            int code = new CommandLine.RunLast().execute(parseResult);
            if (out.checkError()) {
                err.println("decodiff: cannot write the result to standard output (disk full, or the reader closed the pipe?); nothing complete was delivered");
                err.flush();
                return BAD_INPUT;
            }
            return code;
        });
        cl.setExecutionExceptionHandler((ex, commandLine, parseResult) -> {
            var e = commandLine.getErr();
            if (ex instanceof NoCommand) return BAD_INPUT;
            if (isBadInput(ex)) {
                e.println("decodiff: " + oneLine(ex.getMessage()));
            } else {
                e.println("decodiff: internal error: " + ex);
                ex.printStackTrace(e);
            }
            e.flush();
            return BAD_INPUT;
        });
        return cl;
    }

    static boolean isBadInput(Throwable ex) {
        return ex instanceof BadInputException || ex instanceof CheckpointException || ex instanceof SafetensorsException
                || ex instanceof dev.decodiff.llamacpp.gguf.GgufException
                || ex instanceof dev.decodiff.llamacpp.ffi.LlamaCppException || ex instanceof UncheckedIOException || ex instanceof java.nio.file.NoSuchFileException;
    }

    static String oneLine(String s) { return BadInputException.oneLine(s); }

    public static final class Version implements CommandLine.IVersionProvider {
        @Override
        public String[] getVersion() {
            String v = dev.decodiff.harness.Home.version();
            return new String[]{"decodiff " + v + " (dump format v1; Java " + Runtime.version() + ")",
                    "bf16 kernels: " + dev.decodiff.metal.NativeKernels.status(),
                    "weights: " + dev.decodiff.engine.WeightResidency.policy(),
                    "quantized weights: " + dev.decodiff.engine.quant.QuantizedTensors.policy(),
                    "startup cache: " + StartupCache.status()};
        }
    }
}
