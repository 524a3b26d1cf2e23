package dev.decodiff.harness.bench;

import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.KvType;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Each KV cache type's bytes per token, and prefill of {@link BenchSetup#PREFILL} tokens and decode at that
 * context for the encoded types (f32's figures are the main prefill and decode ones).
 */
record KvTypes(Map<KvType, Long> bytesPerToken, Map<KvType, Figure> prefillTps, Map<KvType, Figure> decodeTps) {

    static KvTypes measure(BenchSetup b) {
        var bytes = new LinkedHashMap<KvType, Long>();
        var prefill = new LinkedHashMap<KvType, Figure>();
        var decode = new LinkedHashMap<KvType, Figure>();
        for (var t : KvType.values()) {
            var opts = EngineOptions.defaults().withKvTypes(t, t);
            bytes.put(t, b.model().newSession(opts).kvBytesPerPosition());
            if (t == KvType.F32) continue;
            b.log().accept("KV cache " + t.id() + ": prefill " + BenchSetup.PREFILL + " tokens ×" + b.repeats() + ", decode @512…");
            var p = Prefill.timed(b, opts);
            prefill.put(t, p.tokensPerS());
            decode.put(t, p.decode(b.decodeSteps()));
        }
        return new KvTypes(bytes, prefill, decode);
    }
}
