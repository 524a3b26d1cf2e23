package dev.decodiff.harness.compare.detect;

import dev.decodiff.harness.dump.DumpManifest;

/** The reference's tensors at any step, for detectors that look back over the cache history. */
public interface ReferenceHistory {
    /** The point's values at that step as floats, or null when the reference did not record it. */
    float[] floats(int step, String point);

    DumpManifest manifest();
}
