package dev.decodiff.harness.arch.gemma4.bisect;

import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.engine.arch.Gemma4Architecture;
import dev.decodiff.harness.compare.detect.DetectorContext;

/** The Gemma 4 model behind a detector's context: these detectors recompute Gemma 4's ops, so only its bisect gives them one. */
final class Gemma4Context {
    private Gemma4Context() {}

    /** The context's model, or null in compare (which has only the two dumps). */
    static Gemma4Model model(DetectorContext ctx) { return ctx.model() == null ? null : ((Gemma4Architecture.Loaded) ctx.model()).model(); }
}
