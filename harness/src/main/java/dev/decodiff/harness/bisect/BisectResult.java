package dev.decodiff.harness.bisect;

import dev.decodiff.harness.compare.CellStats;
import dev.decodiff.harness.compare.ComparisonResult;
import dev.decodiff.harness.compare.FirstDivergence;
import dev.decodiff.harness.compare.detect.Finding;

import java.util.List;

/**
 * What bisect proved, starting from compare's first divergent cell: the culprit (the first cell that is wrong on
 * the reference's own inputs and cache history), per layer the local vs the accumulated error, which substitutions of
 * reference tensors heal the culprit layer, what a cache transplant over earlier steps changes, and one diagnosis.
 *
 * @param compare      the free-running comparison bisect started from
 * @param culprit      null when nothing diverges, or when no cell is wrong on its own inputs (see {@link #conclusion})
 * @param layers       per layer at the divergent step
 * @param substitutions inside the culprit layer, in causal order, single tensors then pairs
 * @param transplant   the culprit cell with the reference's cache for steps &lt; t, for t = 0…step
 * @param cacheVerdict one sentence: does the step compute wrongly, or was the cache corrupted earlier
 * @param kvRounding   the lossy KV cache types ("q8_0/q8_0") when the divergence is their expected rounding (the same
 *                     run with an exact f32 cache is within tolerance), else null
 * @param variant      the op variant that reproduced the culprit from the reference's inputs, when one did
 * @param catalog      how an architecture bisected through its fault catalog ({@link CatalogBisector}) named and proved the
 *                     culprit; null for Gemma 4's bisect, which recomputes its ops instead
 */
public record BisectResult(ComparisonResult compare, Culprit culprit, List<LayerRow> layers, List<ModelRow> modelPoints,
                           List<Substitution> substitutions, List<TransplantRow> transplant, String cacheVerdict,
                           String diagnosis, Finding.Variant variant, String conclusion, List<String> notes, double seconds, String kvRounding,
                           CatalogNaming catalog) {

    /**
     * The naming by replay: each catalog fault that changes the culprit cell, planted alone in decodiff's engine run
     * teacher-forced on the reference's tokens, and its tensor's rel L2 to the candidate's there (best first), beside
     * the clean engine's; {@code named} the fault that reproduces the candidate (null when none does, or two fit).
     * {@code engine} is the engine the substitutions ran in: the candidate's own, or, for a candidate dump, the named
     * fault's stand-in. {@code proved}: a substitution at the culprit healed what the error had broken downstream
     * (null when there was nothing downstream to heal, or no engine to substitute into).
     */
    public record CatalogNaming(int step, String point, List<Tried> tried, double cleanRelL2, String named, String engine, Boolean proved) {}

    /** One catalog fault replayed: its tensor's rel L2 to the candidate's at the culprit cell. */
    public record Tried(String fault, double relL2) {}


    /** The first cell, in causal order, that is wrong when its layer gets the reference's input and cache. */
    public record Culprit(int step, Integer layer, String point, CellStats local) {}

    /** Status of a layer at the divergent step. */
    public enum Status {
        CLEAN("clean"), CULPRIT("culprit"), INHERITS("inherits"), ALSO_LOCAL("wrong on its own input too"), NOT_RECORDED("—");

        private final String text;

        Status(String text) { this.text = text; }

        public String text() { return text; }
    }

    /**
     * @param accumulated layers.i.out free-running (from compare), or null if not recorded
     * @param local       layers.i.out on the reference's input and cache
     * @param firstLocalFailure the first point of the layer that fails locally, or null
     */
    public record LayerRow(int layer, CellStats accumulated, CellStats local, String firstLocalFailure, Status status) {}

    /** A model-level point (embed, ple, final_norm, logits) at the divergent step, free-running and local. */
    public record ModelRow(String point, CellStats accumulated, CellStats local) {}

    /**
     * @param name     "attn.v_read", or "attn.k_read+attn.v_read" for a pair
     * @param scope    "all rows", or "last position" for read windows (the engine substitutes those for the step's
     *                 last position only, so only that row of the layer output can heal)
     * @param before   the layer output's rel L2 (in scope) without the substitution
     * @param after    with it, NaN when it could not be substituted
     */
    public record Substitution(String name, List<String> replaced, String scope, double before, double after,
                               double tolerance, boolean healed, String note) {}

    /** @param referenceCacheSteps t: steps 0…t−1 entered the reference's keys and values into the cache */
    public record TransplantRow(int referenceCacheSteps, double relL2, double tolerance, boolean healed, boolean fromCompare) {}

    public FirstDivergence firstDivergence() { return compare.firstDivergence(); }

    /** A cell diverged, or the engine threw (a finding even where every cell before it matched). */
    public boolean diverged() { return compare.firstDivergence() != null || compare.engineFailure() != null; }

    public List<String> healedBy() {
        return substitutions.stream().filter(Substitution::healed).map(Substitution::name).toList();
    }

    public String verdict() {
        if (!diverged()) return "match";
        if (culprit != null) return "culprit";
        if (kvRounding != null) return "kv_cache_rounding";
        return compare.firstDivergence() == null ? "engine_threw" : "inconclusive";
    }

    /** 0 when nothing diverges, 1 when a divergence was found (and bisected) or the engine threw. */
    public int exitCode() { return diverged() ? 1 : 0; }
}
