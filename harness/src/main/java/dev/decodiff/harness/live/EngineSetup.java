package dev.decodiff.harness.live;

import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.KvType;

import java.util.ArrayList;

/** How an engine run differs from the exact default (catalog faults, a lossy KV cache), in words for report headers. */
public final class EngineSetup {
    private EngineSetup() {}

    /** "" when the run is the exact default. */
    public static String describe(EngineOptions o) {
        var parts = new ArrayList<String>();
        if (!o.faults().isEmpty()) parts.add("faults " + String.join(",", o.faults().stream().map(Object::toString).sorted().toList()));
        if (o.keyType() != KvType.F32 || o.valueType() != KvType.F32) parts.add("KV cache " + o.keyType() + "/" + o.valueType());
        return String.join(", ", parts);
    }
}
