package dev.decodiff.harness.arch;

import dev.decodiff.engine.arch.LoadedModel;
import dev.decodiff.harness.dump.DumpManifest;
import dev.decodiff.harness.selftest.ExpectedCell;

/**
 * Where `decodiff selftest` must find each fault of a family's catalog when its engine runs through the plug-in seam
 * (compare, bisect by replay, selfcheck): the catalog's rules resolved on one checkpoint and one case.
 */
public interface CatalogExpectations {
    /** The expected cell of catalog fault {@code faultId} on this model and this case, fixed without running the engine. */
    ExpectedCell of(LoadedModel model, String faultId, DumpManifest m);

    /** The catalog's rule for the fault, in words (the self-test table's last column). */
    String rule(String faultId);

    /** The name of this catalog's object in {@code selftest --json} ("qwen35"): a stable key, unlike the display name. */
    String key();
}
