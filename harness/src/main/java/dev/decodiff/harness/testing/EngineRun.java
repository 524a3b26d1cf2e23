package dev.decodiff.harness.testing;

import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.Fault;
import dev.decodiff.engine.Gemma4Model;

import java.util.EnumSet;
import java.util.Set;

/**
 * An engine run to judge against a reference: a loaded checkpoint and the options (faults) it runs with. The run
 * itself happens in the assertion, teacher-forced on the reference's tokens.
 */
public record EngineRun(Gemma4Model model, EngineOptions options) {
    public static EngineRun of(Gemma4Model model) { return new EngineRun(model, EngineOptions.defaults()); }

    public EngineRun withFaults(Fault... faults) {
        Set<Fault> f = faults.length == 0 ? EnumSet.noneOf(Fault.class) : EnumSet.of(faults[0], faults);
        return new EngineRun(model, options.withFaults(f));
    }

    @Override
    public String toString() { return "engine run of " + model.directory() + (options.faults().isEmpty() ? "" : " with " + options.faults()); }
}
