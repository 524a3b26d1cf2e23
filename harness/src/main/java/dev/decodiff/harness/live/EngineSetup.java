package dev.decodiff.harness.live;

import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.Fault;
import dev.decodiff.harness.Home;
import dev.decodiff.harness.dump.DumpManifest;
import dev.decodiff.metal.MatmulPrecision;
import dev.decodiff.metal.NativeKernels;
import dev.decodiff.engine.KvType;

import java.util.ArrayList;
import java.util.List;

/** How an engine run differs from the exact default (catalog faults, a lossy KV cache, bf16 matmuls), in words for report headers. */
public final class EngineSetup {
    /** decodiff's own Java engine, as dumps name it. */
    public static final String ENGINE = "decodiff-java";

    private EngineSetup() {}

    /**
     * The provenance decodiff's engine writes into a dump (or reports for a live run): version, kernels, KV cache
     * types, faults, and the options of the command that ran it (null for a live run inside compare).
     */
    public static DumpManifest.Producer producer(EngineOptions o, List<String> commandOptions) {
        var faults = o.faults().stream().map(Fault::id).sorted().toList();
        return new DumpManifest.Producer("decodiff", Home.version(), "float32", ENGINE, ENGINE, kernels(o), o.matmul().id(),
                new DumpManifest.KvCache(o.keyType().id(), o.valueType().id()), faults, commandOptions);
    }

    /** The provenance another architecture's engine (exact fp32) writes: its catalog faults by id. */
    public static DumpManifest.Producer producer(List<String> faultIds, List<String> commandOptions) {
        var p = producer(EngineOptions.defaults(), commandOptions);
        return new DumpManifest.Producer(p.name(), p.version(), p.dtype(), p.attention(), p.engine(), p.kernels(), p.matmul(), p.kvCache(),
                faultIds.stream().sorted().toList(), p.options(), p.quantization());
    }

    /**
     * A checkpoint's quantization as dumps record it: its declared MLX quantization, or the tensor types of the GGUF
     * it was converted from (config.json's "decodiff_gguf"), or null for float weights.
     */
    public static DumpManifest.Quantization quantization(java.nio.file.Path dir, dev.decodiff.engine.quant.MlxQuantization q) {
        if (q != null) return quantization(q);
        try {
            var src = new com.fasterxml.jackson.databind.ObjectMapper().readTree(dir.resolve("config.json").toFile())
                    .get(dev.decodiff.llamacpp.gguf.GgufToCheckpoint.SOURCE_KEY);
            if (src == null || !src.isObject()) return null;
            var types = new java.util.LinkedHashMap<String, String>();
            var names = new java.util.ArrayList<String>();
            src.path("matrix_types").fields().forEachRemaining(e -> {
                types.put(e.getKey(), e.getValue().asInt() + " matrices");
                names.add(e.getKey());
            });
            return new DumpManifest.Quantization("gguf", String.join("+", names), null, null, types);
        } catch (java.io.IOException e) {
            return null;
        }
    }

    /** A checkpoint's declared MLX quantization as dumps record it, or null for float weights. */
    public static DumpManifest.Quantization quantization(dev.decodiff.engine.quant.MlxQuantization q) {
        if (q == null) return null;
        var overrides = new java.util.LinkedHashMap<String, String>();
        q.overrides().forEach((k, v) -> overrides.put(k, v.describe()));
        return new DumpManifest.Quantization("mlx", "affine", q.defaults().bits(), q.defaults().groupSize(), overrides);
    }

    /** The kernels that ran, and how the bf16 weights were multiplied when not in exact fp32. */
    static String kernels(EngineOptions o) {
        return switch (o.matmul()) {
            case FP32 -> NativeKernels.status();
            case FP32_FMA -> NativeKernels.status() + "; matmul fp32-fma: fused multiply-adds only";
            case BF16 -> NativeKernels.status() + "; matmul bf16: activations rounded to bf16, "
                    + (NativeKernels.amxAvailable() ? "AMX tiles in prefill, " : "")
                    + (NativeKernels.bf16DotAvailable() ? "AVX512-BF16 dot products" : "fp32 kernels (no AVX512-BF16 here)");
        };
    }

    /** "" when the run is the exact default. */
    public static String describe(EngineOptions o) {
        var parts = new ArrayList<String>();
        if (!o.faults().isEmpty()) parts.add("faults " + String.join(",", o.faults().stream().map(Object::toString).sorted().toList()));
        if (o.keyType() != KvType.F32 || o.valueType() != KvType.F32) parts.add("KV cache " + o.keyType() + "/" + o.valueType());
        if (o.matmul() != MatmulPrecision.FP32) parts.add("matmul " + o.matmul());
        return String.join(", ", parts);
    }
}
