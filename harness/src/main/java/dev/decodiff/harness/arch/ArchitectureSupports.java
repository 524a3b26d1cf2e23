package dev.decodiff.harness.arch;

import dev.decodiff.engine.arch.Architecture;
import dev.decodiff.engine.arch.Architectures;
import dev.decodiff.harness.arch.gemma4.Gemma4Support;
import dev.decodiff.harness.arch.qwen35.Qwen35Support;

import java.util.List;

/** The registry of the harness-side plug-ins, one per {@link Architectures#ALL} entry. */
public final class ArchitectureSupports {
    private ArchitectureSupports() {}

    /** A family with nothing beyond the engine seam (the Llama family): every feature's default. */
    private record Plain(Architecture architecture) implements ArchitectureSupport {}

    private static final List<ArchitectureSupport> ALL = List.of(Gemma4Support.INSTANCE, Qwen35Support.INSTANCE);

    /** The harness plug-in of an architecture. */
    public static ArchitectureSupport of(Architecture architecture) {
        for (var s : ALL) if (s.architecture() == architecture) return s;
        return new Plain(architecture);
    }
}
