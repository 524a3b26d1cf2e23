package dev.decodiff.engine.quant;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * What an MLX checkpoint's quantization did: the config it declared, the spec each quantized tensor (by its name in
 * the file) was read with, and which of them stay packed (the rest were dequantized to fp32 at load). For inspect,
 * dump provenance and compare headers.
 */
public record QuantizationSummary(MlxQuantization config, Map<String, MlxQuantization.Spec> tensors, Set<String> packed) {

    public QuantizationSummary {
        tensors = Map.copyOf(tensors);
        packed = Set.copyOf(packed);
    }

    /**
     * "MLX 4-bit, group 64, affine; 2 per-tensor overrides; 43 tensors kept packed (dequantized in the kernels)", or
     * "…; 40 tensors kept packed, 3 dequantized to fp32 at load", or "…; 43 tensors dequantized to fp32 at load".
     */
    public String describe() {
        int p = packed.size(), d = tensors.size() - p;
        String what = p == 0 ? d + " tensors dequantized to fp32 at load"
                : d == 0 ? p + " tensors kept packed (dequantized in the kernels)"
                : p + " tensors kept packed, " + d + " dequantized to fp32 at load";
        return "MLX " + config.describe() + "; " + what;
    }

    /** How many tensors each spec covers, most first ("4-bit, group 64: 41 tensors"). */
    public List<String> countsBySpec() {
        var counts = new TreeMap<String, Integer>();
        for (var s : tensors.values()) counts.merge(s.describe(), 1, Integer::sum);
        var out = new ArrayList<String>();
        counts.entrySet().stream().sorted((a, b) -> b.getValue() - a.getValue())
                .forEach(e -> out.add(e.getKey() + ": " + e.getValue() + " tensor" + (e.getValue() == 1 ? "" : "s")));
        return out;
    }

    /** Every per-tensor override as "module: 8-bit, group 64" (or "module: not quantized"), in config order. */
    public List<String> overrides() {
        var out = new ArrayList<String>();
        config.overrides().forEach((k, v) -> out.add(k + ": " + v.describe()));
        return out;
    }
}
