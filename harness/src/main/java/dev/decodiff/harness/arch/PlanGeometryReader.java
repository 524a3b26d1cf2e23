package dev.decodiff.harness.arch;

import dev.decodiff.harness.plan.PlanGeometry;

import java.nio.file.Path;

/** `decodiff plan`'s reading of a checkpoint's config.json: every point's shape and what each read holds. */
public interface PlanGeometryReader {
    /** Whether a config.json of this model_type (a multimodal wrapper's included) is this family's. */
    boolean reads(String modelType);

    /** The geometry config.json {@code file} gives; a bad config throws with one line. */
    PlanGeometry read(Path file);
}
