package dev.decodiff.harness.arch;

import dev.decodiff.engine.arch.LoadedModel;

import java.util.function.Function;

/**
 * A family's own engine model type, which a JUnit test may take as a {@code @Checkpoint} parameter in place of
 * {@link LoadedModel} (tests written before the plug-in seam did), and how to get it out of a loaded model of that family.
 */
public record OwnModel<T>(Class<T> type, Function<LoadedModel, T> unwrap) {}
