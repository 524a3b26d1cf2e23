package dev.decodiff.engine.quant;

import com.fasterxml.jackson.databind.JsonNode;
import dev.decodiff.engine.CheckpointException;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;

/**
 * The {@code quantization} object of an MLX checkpoint's config.json, as mlx-lm and mlx-vlm write it: the default
 * {@code bits}, {@code group_size} and {@code mode}, plus per-module overrides keyed by the module's path in the
 * checkpoint ("language_model.model.layers.0.mlp.down_proj"): an object with its own bits/group_size, {@code true}
 * (the defaults) or {@code false} (left unquantized). Every key is read; one this engine cannot honour is refused with
 * its name, never skipped (an override dropped silently would dequantize a tensor with the wrong bits).
 */
public record MlxQuantization(Spec defaults, Map<String, Override> overrides) {

    /** The bit widths and group sizes MLX's affine quantization supports. */
    public static final Set<Integer> BITS = Set.of(2, 3, 4, 5, 6, 8);
    public static final Set<Integer> GROUP_SIZES = Set.of(32, 64, 128);

    /** How one tensor is quantized: w = scale·q + bias per group of {@code groupSize} consecutive columns. */
    public record Spec(int bits, int groupSize) {
        public String describe() { return bits + "-bit, group " + groupSize; }
    }

    /** A per-module entry: quantized with {@code spec}, or ({@code spec == null}) not quantized. */
    public record Override(Spec spec) {
        public boolean quantized() { return spec != null; }

        public String describe() { return spec == null ? "not quantized" : spec.describe(); }
    }

    public MlxQuantization {
        overrides = Collections.unmodifiableMap(new LinkedHashMap<>(overrides));
    }

    /**
     * The quantization of config.json {@code root}: its top-level "quantization", else text_config's; null when
     * neither has one (an unquantized checkpoint).
     */
    public static MlxQuantization of(JsonNode root, String file) {
        if (root == null) return null;
        JsonNode q = root.get("quantization");
        if ((q == null || q.isNull()) && root.has("text_config")) q = root.get("text_config").get("quantization");
        if (q == null || q.isNull()) return null;
        if (!q.isObject()) throw new CheckpointException(file + ": 'quantization' must be an object like {\"bits\": 4, \"group_size\": 64}; fix config.json");
        String mode = q.path("mode").asText("affine");
        if (!mode.equals("affine"))
            throw new CheckpointException(file + ": quantization mode '" + mode + "' is not supported (only affine: w = scale·q + bias); convert the model with mode affine");
        var defaults = spec(q, null, file, "quantization");
        var overrides = new LinkedHashMap<String, Override>();
        for (var it = q.fields(); it.hasNext(); ) {
            var e = it.next();
            String k = e.getKey();
            JsonNode v = e.getValue();
            if (k.equals("bits") || k.equals("group_size") || k.equals("mode")) continue;
            if (v.isBoolean()) overrides.put(k, new Override(v.asBoolean() ? defaults : null));
            else if (v.isObject()) {
                String m = v.path("mode").asText(mode);
                if (!m.equals("affine"))
                    throw new CheckpointException(file + ": quantization override '" + k + "' has mode '" + m
                            + "', which is not supported (only affine); convert that tensor with mode affine");
                overrides.put(k, new Override(spec(v, defaults, file, "quantization." + k)));
            } else
                throw new CheckpointException(file + ": quantization key '" + k + "' = " + v
                        + " is neither bits/group_size/mode nor a module override (an object, true or false); fix config.json");
        }
        return new MlxQuantization(defaults, overrides);
    }

    private static Spec spec(JsonNode n, Spec inherit, String file, String where) {
        int bits = integer(n, "bits", inherit == null ? null : inherit.bits(), file, where);
        int group = integer(n, "group_size", inherit == null ? null : inherit.groupSize(), file, where);
        if (!BITS.contains(bits))
            throw new CheckpointException(file + ": " + where + ".bits = " + bits + " is not supported (MLX affine: 2, 3, 4, 5, 6 or 8); fix config.json");
        if (!GROUP_SIZES.contains(group))
            throw new CheckpointException(file + ": " + where + ".group_size = " + group + " is not supported (MLX affine: 32, 64 or 128); fix config.json");
        return new Spec(bits, group);
    }

    private static int integer(JsonNode n, String key, Integer inherit, String file, String where) {
        JsonNode v = n.get(key);
        if (v == null || v.isNull()) {
            if (inherit != null) return inherit;
            throw new CheckpointException(file + ": " + where + " has no '" + key + "'; MLX writes both bits and group_size — fix config.json");
        }
        if (!v.isIntegralNumber() || !v.canConvertToInt())
            throw new CheckpointException(file + ": " + where + "." + key + " = " + v + " is not an integer; fix config.json");
        return v.intValue();
    }

    /** One line: "4-bit, group 64, affine; 2 overrides". */
    public String describe() {
        return defaults.describe() + ", affine" + (overrides.isEmpty() ? "" : "; " + overrides.size() + " per-tensor override" + (overrides.size() == 1 ? "" : "s"));
    }
}
