package dev.decodiff.engine;

import java.util.EnumSet;
import java.util.Set;

/**
 * How a session runs: which catalog faults are switched on (none by default), the probe, if any, and how the KV
 * cache stores keys and values (f32 unless asked).
 */
public record EngineOptions(Set<Fault> faults, Probe probe, KvType keyType, KvType valueType) {
    public EngineOptions {
        faults = faults == null || faults.isEmpty() ? Set.of() : Set.copyOf(EnumSet.copyOf(faults));
        keyType = keyType == null ? KvType.F32 : keyType;
        valueType = valueType == null ? KvType.F32 : valueType;
    }

    public EngineOptions(Set<Fault> faults, Probe probe) { this(faults, probe, KvType.F32, KvType.F32); }

    public static EngineOptions defaults() { return new EngineOptions(Set.of(), null); }

    public EngineOptions withProbe(Probe p) { return new EngineOptions(faults, p, keyType, valueType); }

    public EngineOptions withFaults(Set<Fault> f) { return new EngineOptions(f, probe, keyType, valueType); }

    public EngineOptions withKvTypes(KvType k, KvType v) { return new EngineOptions(faults, probe, k, v); }

    public boolean has(Fault f) { return faults.contains(f); }
}
