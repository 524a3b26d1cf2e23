package dev.decodiff.harness.arch;

import dev.decodiff.engine.CheckpointException;
import dev.decodiff.engine.arch.Architecture;
import dev.decodiff.engine.arch.Architectures;
import dev.decodiff.harness.arch.gemma4.Gemma4Support;
import dev.decodiff.harness.arch.llama.LlamaSupport;
import dev.decodiff.harness.arch.qwen35.Qwen35Support;

import java.nio.file.Path;
import java.util.List;

/** The registry of the harness-side plug-ins, one per {@link Architectures#ALL} entry. */
public final class ArchitectureSupports {
    private ArchitectureSupports() {}

    /** A family with nothing beyond the engine seam: every feature's default. */
    private record Plain(Architecture architecture) implements ArchitectureSupport {}

    private static final List<ArchitectureSupport> ALL = List.of(Gemma4Support.INSTANCE, Qwen35Support.INSTANCE, LlamaSupport.INSTANCE);

    /** The harness plug-in of an architecture. */
    public static ArchitectureSupport of(Architecture architecture) {
        for (var s : ALL) if (s.architecture() == architecture) return s;
        return new Plain(architecture);
    }

    /**
     * The tunable engine for the checkpoint folder {@code dir}, for a command that runs only on one (run, kv-drift,
     * sweep, bench): its architecture's, or else Gemma 4's, the one tunable engine so far, whose loading then refuses the
     * folder with the one line those commands have always given (a folder without config.json, another model type).
     */
    public static TunableEngine tunableEngineFor(Path dir) {
        Architecture arch;
        try {
            arch = Architectures.of(dir);
        } catch (CheckpointException e) {
            arch = null; // Gemma 4's loader says what is wrong with the folder, in its own words
        }
        var own = arch == null ? java.util.Optional.<TunableEngine>empty() : of(arch).tunableEngine();
        return own.orElseGet(() -> Gemma4Support.INSTANCE.tunableEngine().orElseThrow());
    }
}
