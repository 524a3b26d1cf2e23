package dev.decodiff.harness.arch.qwen35;

import dev.decodiff.engine.qwen35.Qwen35Config;
import dev.decodiff.engine.qwen35.Qwen35Fault;
import dev.decodiff.harness.dump.DumpManifest;
import dev.decodiff.harness.selfcheck.RecurrentSelfCheck;
import dev.decodiff.harness.selftest.ExpectedCell;

/**
 * A Qwen3.5 catalog fault's expected cell ({@link Qwen35Fault#expected}) resolved on one checkpoint's config and one
 * case's steps: the one reading of the catalog's rules that {@code decodiff selftest} and the localization tests share.
 * Fixed from the rule, the config and the manifest — never from running the engine.
 */
public final class Qwen35Expectations {
    private Qwen35Expectations() {}

    public static ExpectedCell of(Qwen35Fault fault, Qwen35Config cfg, DumpManifest m) {
        var e = fault.expected();
        int layer = e.layerIn(cfg);
        if (layer < 0) return new ExpectedCell.NotApplicable("the checkpoint has no " + switch (e.layer()) {
            case FIRST -> "layer";
            case FIRST_LINEAR -> "linear-attention layer";
            case FIRST_FULL -> "full-attention layer";
            case FIRST_MOE -> "MoE layer";
        } + ", so the fault cannot change a number");
        String point = e.pointIn(cfg);
        if (e.afterRestore()) {
            int prefix = RecurrentSelfCheck.prefixLength(m.promptLength());
            return new ExpectedCell.SelfCheckCell("prefix-reuse", prefix, point,
                    "a reference case never restores a snapshot; selfcheck's prefix-reuse does, at position " + prefix);
        }
        int step = e.stepIn(m.stepStarts(), m.stepLengths());
        if (step < 0) return new ExpectedCell.NotApplicable("the case has no " + switch (e.when()) {
            case PREFILL -> "prompt step";
            case FIRST_DECODE -> "one-token step after its prompt";
            case DECODE_AFTER_DECODE -> "one-token step right after another";
            case FIRST_CONTINUATION -> "multi-token continuation";
            case AFTER_RESTORE -> "restore";
        } + ", so the fault cannot change a number");
        return new ExpectedCell.Cell(step, layer, point, e.toString());
    }
}
