package dev.decodiff.harness.arch.llama;

import dev.decodiff.engine.llama.LlamaConfig;
import dev.decodiff.engine.llama.LlamaFault;
import dev.decodiff.harness.dump.DumpManifest;
import dev.decodiff.harness.selftest.ExpectedCell;

/**
 * A Llama-family catalog fault's expected cell ({@link LlamaFault#expected}) resolved on one checkpoint's config and
 * one case's steps: the reading of the catalog's rules that {@code decodiff selftest} uses. Fixed from the rule, the
 * config and the manifest — never from running the engine.
 */
public final class LlamaExpectations {
    private LlamaExpectations() {}

    public static ExpectedCell of(LlamaFault fault, LlamaConfig cfg, DumpManifest m) {
        var e = fault.expected();
        // the checkpoint first: a fault it cannot show says what it lacks, whatever the case's steps
        if (!e.appliesTo(cfg))
            return new ExpectedCell.NotApplicable("the checkpoint lacks " + e.requires().what() + ", so the fault cannot change a number");
        int step = e.stepIn(m.stepStarts(), m.stepLengths());
        if (step < 0) return new ExpectedCell.NotApplicable("the case has no " + switch (e.when()) {
            case PREFILL -> "prompt step";
            case FIRST_DECODE -> "one-token step after its prompt";
        } + ", so the fault cannot change a number");
        return new ExpectedCell.Cell(step, e.layerIn(cfg), e.pointIn(cfg), e.toString());
    }
}
