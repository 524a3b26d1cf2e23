package dev.decodiff.engine;

import dev.decodiff.metal.MatmulPrecision;

import java.util.EnumSet;
import java.util.Set;

/**
 * How a session runs: which catalog faults are switched on (none by default), the probe, if any, how the KV
 * cache stores keys and values (f32 unless asked), and the precision of the bf16 weights' products (exact fp32
 * unless asked).
 */
public record EngineOptions(Set<Fault> faults, Probe probe, KvType keyType, KvType valueType, MatmulPrecision matmul) {
    public EngineOptions {
        matmul = matmul == null ? MatmulPrecision.FP32 : matmul;
        faults = faults == null || faults.isEmpty() ? Set.of() : Set.copyOf(EnumSet.copyOf(faults));
        keyType = keyType == null ? KvType.F32 : keyType;
        valueType = valueType == null ? KvType.F32 : valueType;
    }

    public EngineOptions(Set<Fault> faults, Probe probe, KvType keyType, KvType valueType) { this(faults, probe, keyType, valueType, MatmulPrecision.FP32); }

    public EngineOptions(Set<Fault> faults, Probe probe) { this(faults, probe, KvType.F32, KvType.F32); }

    public static EngineOptions defaults() { return new EngineOptions(Set.of(), null); }

    public EngineOptions withProbe(Probe p) { return new EngineOptions(faults, p, keyType, valueType, matmul); }

    public EngineOptions withFaults(Set<Fault> f) { return new EngineOptions(f, probe, keyType, valueType, matmul); }

    public EngineOptions withKvTypes(KvType k, KvType v) { return new EngineOptions(faults, probe, k, v, matmul); }

    public EngineOptions withMatmul(MatmulPrecision m) { return new EngineOptions(faults, probe, keyType, valueType, m); }

    public boolean has(Fault f) { return faults.contains(f); }
}
