package dev.decodiff.harness.cli;

import dev.decodiff.harness.arch.ArchitectureSupport;
import dev.decodiff.harness.arch.ArchitectureSupports;
import dev.decodiff.harness.arch.SweepSupport;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;

@Command(name = "sweep", mixinStandardHelpOptions = true,
        description = {"Sweeps KV-cache scenarios across the model's boundaries and finds the decode that breaks, with no reference.",
                "Each scenario family runs the same tokens along two schedules (one pass vs prefill + decode, chunked prefill, a speculative verify,",
                "snapshot/restore, a prefix copied to another sequence, truncate and continue, several sequences in one batch) and must give the same rows",
                "at every (sequence, position, capture point); every step is also checked against the KV-integrity rules (a read window covers",
                "exactly what the mask allows; a row read back is the row written, up to the storage type's rounding).",
                "Boundaries come from config.json and the engine's options: W−1, W, W+1, each ring wrap k·W, chunk edges k·c+{0,1}, the cache's capacity.",
                "A family's first failure is minimized (fewest operations, smallest length) and localized to its first cell in causal order;",
                "--repro DIR writes it as a self-contained folder (schedule, weights hash, the failing cell, and a C program against llama.h).",
                "A cut that a sliding ring of the window only cannot honour is expected to be refused; a silent wrong answer there is the finding.",
                "Format of --scenario files and the families: docs/scenarios.md."},
        footer = {"", "Exit codes: 0 every scenario passes (or is refused as designed), 1 a scenario fails, 2 bad input or usage.",
                "Examples:",
                "  decodiff sweep",
                "  decodiff sweep --fault ring-wrap --repro /tmp/ring-wrap",
                "  decodiff sweep --engine llama.cpp --json",
                "  decodiff sweep --scenario my-scenario.json --engine llama.cpp --repro /tmp/repro"})
final class SweepCommand implements Callable<Integer> {
    @Option(names = "--model", paramLabel = "DIR", description = "Checkpoint to sweep (default: the bundled checkpoints/gemma4-tiny).")
    Path model;

    @Option(names = "--scenario", paramLabel = "FILE", description = "Run this scenario (JSON, docs/scenarios.md) instead of the sweep.")
    Path scenario;

    @Option(names = "--family", paramLabel = "NAME", split = ",", description = "Sweep only these families (comma-separated; default all).")
    List<String> families = new ArrayList<>();

    @Option(names = "--max-length", paramLabel = "N", description = "Longest boundary swept (default 3·W+2: the window's edges and two ring wraps).")
    Integer maxLength;

    @Option(names = "--repro", paramLabel = "DIR", description = "Write the first failure, minimized, as a repro folder there.")
    Path repro;

    @Option(names = "--html", paramLabel = "FILE", description = "Also write a self-contained HTML report (every family in every setting, pass / fail / refused-as-designed).")
    Path html;

    @Option(names = "--no-minimize", description = "Report each family's first failure as found, without shrinking it.")
    boolean noMinimize;

    @Option(names = "--progress", description = "Draw a progress bar on stderr (default: when stderr is a terminal).")
    Boolean progress;

    @picocli.CommandLine.Mixin
    EngineFlags engine = new EngineFlags();

    @picocli.CommandLine.Mixin
    LlamaCppFlags llama = new LlamaCppFlags();

    @picocli.CommandLine.Mixin
    JsonOption json = new JsonOption();

    @picocli.CommandLine.Spec
    picocli.CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() {
        Path dir = model != null ? model : SelfCheckCommand.defaultModel();
        var sweep = ArchitectureSupports.featureFor(dir, ArchitectureSupport::sweep);
        var request = new SweepSupport.Request(dir, families, maxLength, scenario, !noMinimize, progress, json.on(), html, repro,
                engine.kvCache, llama.flashAttn, llama::isLlamaCpp, () -> llama.resolveGguf(dir, false),
                llama.threads == null ? 1 : llama.threads, engine::options);
        return sweep.run(request, spec.commandLine().getOut()) ? Main.MATCH : Main.DIVERGENCE;
    }
}
