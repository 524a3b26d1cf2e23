package dev.decodiff.harness.cli;

import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.ops.KernelChecks;
import dev.decodiff.harness.ops.OpResult;
import dev.decodiff.harness.ops.OpsReport;
import dev.decodiff.harness.ops.Oracle;
import dev.decodiff.harness.ops.OracleLoader;
import dev.decodiff.harness.ops.OracleUnavailableException;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;

@Command(name = "ops", mixinStandardHelpOptions = true,
        description = "Checks each metal kernel (matvec/matmul in bf16, f16 and f32 weights, RMSNorm, RoPE default and proportional, "
                + "softmax, attention, gelu-tanh) on seeded random inputs of model shapes against ND4J in float64, an independent oracle, "
                + "and reports NMSE per op against per-op thresholds (docs/ops.md). ND4J is loaded by this command only.",
        footer = {"", "Exit codes: 0 every op within its threshold, 1 some op exceeds it, 2 ND4J could not be loaded or bad usage.",
                "Examples:",
                "  decodiff ops",
                "  decodiff ops --json",
                "  decodiff ops --op rope --perturb rope=1e-3   # NMSE 1e-6 of noise: must fail"})
final class OpsCommand implements Callable<Integer> {
    @picocli.CommandLine.Mixin
    JsonOption json = new JsonOption();

    @Option(names = "--seed", paramLabel = "N", defaultValue = "" + KernelChecks.DEFAULT_SEED,
            description = "Seed of the random inputs (default ${DEFAULT-VALUE}).")
    long seed;

    @Option(names = "--op", paramLabel = "OP", description = "Check only this op (repeatable): ${COMPLETION-CANDIDATES}.",
            completionCandidates = OpNames.class)
    List<String> only = new ArrayList<>();

    @Option(names = "--perturb", paramLabel = "OP=REL",
            description = "Checks the checker: adds Gaussian noise of relative size REL (NMSE ≈ REL²) to our output of OP (repeatable).")
    List<String> perturb = new ArrayList<>();

    @picocli.CommandLine.Spec
    picocli.CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() {
        Map<String, Double> noise = parsePerturb();
        for (String op : only) knownOp(op, "--op");
        var err = spec.commandLine().getErr();
        Oracle oracle;
        try {
            oracle = OracleLoader.nd4j();
        } catch (OracleUnavailableException e) {
            err.println("decodiff: " + BadInputException.oneLine(e.getMessage()));
            err.flush();
            return Main.BAD_INPUT;
        }
        List<OpResult> results = KernelChecks.run(oracle, seed, new java.util.HashSet<>(only), noise, null);
        var out = spec.commandLine().getOut();
        if (json.on()) out.println(OpsReport.json(oracle.describe(), oracle.initSeconds(), seed, results));
        else out.print(OpsReport.terminal(oracle.describe(), oracle.initSeconds(), seed, results));
        out.flush();
        return OpsReport.allPassed(results) ? Main.MATCH : Main.DIVERGENCE;
    }

    static final class OpNames implements Iterable<String> {
        @Override
        public java.util.Iterator<String> iterator() { return KernelChecks.OPS.iterator(); }
    }

    private static void knownOp(String op, String option) {
        if (!KernelChecks.OPS.contains(op))
            throw new BadInputException(option + ": unknown op '" + op + "'; ops are " + String.join(", ", KernelChecks.OPS));
    }

    private Map<String, Double> parsePerturb() {
        var m = new LinkedHashMap<String, Double>();
        for (String p : perturb) {
            int eq = p.indexOf('=');
            String op = eq < 0 ? p : p.substring(0, eq);
            knownOp(op, "--perturb");
            double rel;
            try {
                rel = eq < 0 ? 1e-3 : Double.parseDouble(p.substring(eq + 1));
            } catch (NumberFormatException e) {
                throw new BadInputException("--perturb: '" + p + "' is not OP=REL (e.g. rope=1e-3)");
            }
            if (!(rel > 0) || !Double.isFinite(rel)) throw new BadInputException("--perturb: REL must be a positive number, got " + p);
            m.put(op, rel);
        }
        return m;
    }
}
