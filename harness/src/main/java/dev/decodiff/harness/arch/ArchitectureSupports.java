package dev.decodiff.harness.arch;

import dev.decodiff.engine.CheckpointException;
import dev.decodiff.engine.arch.Architecture;
import dev.decodiff.engine.arch.Architectures;
import dev.decodiff.harness.arch.gemma4.Gemma4Support;
import dev.decodiff.harness.arch.llama.LlamaSupport;
import dev.decodiff.harness.arch.qwen35.Qwen35Support;

import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.function.Function;

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

    /** The supports that offer a feature, in {@link Architectures#ALL}'s order. */
    public static List<ArchitectureSupport> offering(Function<ArchitectureSupport, Optional<?>> feature) {
        return ALL.stream().filter(s -> feature.apply(s).isPresent()).toList();
    }

    /** Whether {@code type} is some family's own engine model type ({@link ArchitectureSupport#ownModel}). */
    public static boolean isOwnModelType(Class<?> type) {
        return ALL.stream().anyMatch(s -> s.ownModel().filter(o -> o.type() == type).isPresent());
    }

    /**
     * The tunable engine for the checkpoint folder {@code dir}, for a command that runs only on one (run): see
     * {@link #featureFor}.
     */
    public static TunableEngine tunableEngineFor(Path dir) { return featureFor(dir, ArchitectureSupport::tunableEngine); }

    /**
     * A feature only some architectures offer, for the checkpoint folder {@code dir}: its architecture's, or else
     * Gemma 4's (where every such feature started), whose own reading of the folder then refuses it with the one line
     * those commands have always given ("model_type 'qwen3_5_text' is not a Gemma 4 text model", "no config.json — …").
     */
    public static <T> T featureFor(Path dir, Function<ArchitectureSupport, Optional<T>> feature) {
        Architecture arch;
        try {
            arch = Architectures.of(dir);
        } catch (CheckpointException e) {
            arch = null; // Gemma 4's reader says what is wrong with the folder, in its own words
        }
        var own = arch == null ? Optional.<T>empty() : feature.apply(of(arch));
        return own.orElseGet(() -> feature.apply(Gemma4Support.INSTANCE).orElseThrow());
    }

    /**
     * The plan's reader of a config.json whose model_type is {@code modelType}: the family's that reads it, or empty.
     * A model_type that could not be read (null) gets Gemma 4's (where the plan's shapes started), whose reading of the
     * file then says what is wrong with it.
     */
    public static Optional<PlanGeometryReader> planGeometry(String modelType) {
        if (modelType == null) return Gemma4Support.INSTANCE.planGeometry();
        for (var s : ALL) {
            var reader = s.planGeometry().filter(r -> r.reads(modelType));
            if (reader.isPresent()) return reader;
        }
        return Optional.empty();
    }

    /**
     * `selfcheck --engine llama.cpp` for a checkpoint of {@code arch}: its architecture's checks, or else Qwen3.5's (the
     * recurrent family the seam's path was written for), whose config reader then refuses the folder with the one line
     * selfcheck has always given.
     */
    public static LlamaCppSelfChecks llamaCppSelfChecks(Architecture arch) {
        return of(arch).llamaCppSelfChecks().orElseGet(() -> Qwen35Support.INSTANCE.llamaCppSelfChecks().orElseThrow());
    }
}
