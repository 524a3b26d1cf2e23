package dev.decodiff.harness.bench;

import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.KvType;
import dev.decodiff.engine.Sampler;
import dev.decodiff.engine.arch.ModelSession;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Every KV cache type, f32 included, measured the same way in one stretch of time, so their ratios are not a
 * comparison of two moments of a shared machine: bytes per token; prefill of {@link BenchSetup#PREFILL} tokens in
 * fresh sessions, the types in turn, {@code repeats} rounds; then greedy decode at each of {@link #CONTEXTS} on one
 * session per type and context, one step of each session in turn, {@code 2 × decodeSteps} timed steps each after one
 * untimed step (the packed types' attention kernels compile on their first steps). Each type's decode over f32's is
 * the median of the per-round ratios (a round's steps ran within the same second or two).
 */
record KvTypes(Map<KvType, Long> bytesPerToken, Map<KvType, Figure> prefillTps, Map<Integer, Map<KvType, Figure>> decodeTps,
               Map<Integer, Map<KvType, Figure>> decodeOverF32) {

    static final int[] CONTEXTS = {BenchSetup.PREFILL, 2048};

    static KvTypes measure(BenchSetup b) {
        var types = KvType.values();
        var bytes = new LinkedHashMap<KvType, Long>();
        var opts = new EngineOptions[types.length];
        for (int k = 0; k < types.length; k++) {
            opts[k] = EngineOptions.defaults().withKvTypes(types[k], types[k]);
            bytes.put(types[k], b.engine().kvBytesPerPosition(b.model(), opts[k]));
        }
        b.log().accept("KV cache types: prefill " + BenchSetup.PREFILL + " tokens ×" + b.repeats() + " each, in turn…");
        double[][] prefillS = new double[types.length][b.repeats()];
        var sessions = new ModelSession[CONTEXTS.length * types.length];
        var logits = new float[sessions.length][];
        for (int r = 0; r < b.repeats(); r++) {
            for (int k = 0; k < types.length; k++) {
                var s = b.session(opts[k]);
                long t0 = System.nanoTime();
                logits[k] = s.forward(b.prompt(BenchSetup.PREFILL));
                prefillS[k][r] = BenchSetup.secondsSince(t0);
                sessions[k] = s; // the last round's sessions decode at the prefill's context
            }
        }
        for (int c = 1; c < CONTEXTS.length; c++) {
            b.log().accept("KV cache types: reading " + CONTEXTS[c] + " tokens for each (untimed)…");
            for (int k = 0; k < types.length; k++) {
                int i = c * types.length + k;
                sessions[i] = b.session(opts[k]);
                logits[i] = sessions[i].forward(b.prompt(CONTEXTS[c]));
            }
        }
        int steps = 2 * b.decodeSteps();
        b.log().accept("KV cache types: decode @" + CONTEXTS[0] + "/" + CONTEXTS[1] + ", " + steps + " steps, every type in turn…");
        for (int i = 0; i < sessions.length; i++) logits[i] = sessions[i].forward(new int[]{Sampler.argmax(logits[i])}); // warm-up step
        double[][] sec = Decode.stepSeconds(sessions, logits, steps);
        var prefill = new LinkedHashMap<KvType, Figure>();
        var decode = new LinkedHashMap<Integer, Map<KvType, Figure>>();
        var overF32 = new LinkedHashMap<Integer, Map<KvType, Figure>>();
        for (int k = 0; k < types.length; k++) prefill.put(types[k], Figure.rates(BenchSetup.PREFILL, prefillS[k]));
        for (int c = 0; c < CONTEXTS.length; c++) {
            var d = new LinkedHashMap<KvType, Figure>();
            var o = new LinkedHashMap<KvType, Figure>();
            double[] f32 = sec[c * types.length + KvType.F32.ordinal()];
            for (int k = 0; k < types.length; k++) {
                double[] own = sec[c * types.length + k];
                d.put(types[k], Figure.rates(1, own));
                double[] ratio = new double[steps];
                for (int i = 0; i < steps; i++) ratio[i] = f32[i] / own[i]; // tokens/s over f32's = f32's time over this type's
                o.put(types[k], Figure.of(ratio));
            }
            decode.put(CONTEXTS[c], d);
            overF32.put(CONTEXTS[c], o);
        }
        return new KvTypes(bytes, prefill, decode, overF32);
    }

    /** The slowest encoded type's prefill over f32's (a cliff shows here). */
    double worstPrefillRatio() {
        double f32 = prefillTps.get(KvType.F32).median(), w = Double.POSITIVE_INFINITY;
        for (var e : prefillTps.entrySet()) if (e.getKey() != KvType.F32) w = Math.min(w, e.getValue().median() / f32);
        return w;
    }

    /** The slowest of q8_0 and q4_0 decode at the longest context over f32's (median per-round ratios). */
    double worstQuantizedDecodeRatio() {
        var o = decodeOverF32.get(CONTEXTS[CONTEXTS.length - 1]);
        return Math.min(o.get(KvType.Q8_0).median(), o.get(KvType.Q4_0).median());
    }
}
