package dev.decodiff.engine;

import java.util.EnumSet;
import java.util.Set;

/** How a session runs: which catalog faults are switched on (none by default) and the probe, if any. */
public record EngineOptions(Set<Fault> faults, Probe probe) {
    public EngineOptions {
        faults = faults == null || faults.isEmpty() ? Set.of() : Set.copyOf(EnumSet.copyOf(faults));
    }

    public static EngineOptions defaults() { return new EngineOptions(Set.of(), null); }

    public EngineOptions withProbe(Probe p) { return new EngineOptions(faults, p); }

    public EngineOptions withFaults(Set<Fault> f) { return new EngineOptions(f, probe); }

    public boolean has(Fault f) { return faults.contains(f); }
}
