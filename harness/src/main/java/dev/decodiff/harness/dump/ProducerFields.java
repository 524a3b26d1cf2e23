package dev.decodiff.harness.dump;

import com.fasterxml.jackson.databind.JsonNode;
import dev.decodiff.harness.BadInputException;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;

/** Reads a manifest's "producer" object: every field optional, but a field that is present must have its type. */
final class ProducerFields {
    private ProducerFields() {}

    static DumpManifest.Producer read(JsonNode p, Function<String, BadInputException> fail) {
        DumpManifest.KvCache kv = null;
        JsonNode k = p.get("kv_cache");
        if (k != null && !k.isNull()) {
            if (!k.isObject()) throw fail.apply("\"producer.kv_cache\" must be an object like {\"keys\": \"f32\", \"values\": \"f32\"}");
            kv = new DumpManifest.KvCache(text(k, "keys", "producer.kv_cache.keys", fail), text(k, "values", "producer.kv_cache.values", fail));
            if (kv.keys() == null || kv.values() == null)
                throw fail.apply("\"producer.kv_cache\" needs both \"keys\" and \"values\"");
        }
        return new DumpManifest.Producer(text(p, "name", "producer.name", fail), text(p, "version", "producer.version", fail),
                text(p, "dtype", "producer.dtype", fail), text(p, "attention", "producer.attention", fail),
                text(p, "engine", "producer.engine", fail), text(p, "kernels", "producer.kernels", fail),
                text(p, "matmul", "producer.matmul", fail), kv,
                strings(p, "faults", fail), strings(p, "options", fail), quantization(p, fail));
    }

    private static DumpManifest.Quantization quantization(JsonNode p, Function<String, BadInputException> fail) {
        JsonNode q = p.get("quantization");
        if (q == null || q.isNull()) return null;
        String shape = "\"producer.quantization\" must be an object like {\"format\": \"mlx\", \"mode\": \"affine\", \"bits\": 4, \"group_size\": 64, \"overrides\": {…}}";
        if (!q.isObject()) throw fail.apply(shape);
        var overrides = new java.util.LinkedHashMap<String, String>();
        JsonNode o = q.get("overrides");
        if (o != null && !o.isNull()) {
            if (!o.isObject()) throw fail.apply("\"producer.quantization.overrides\" must map module paths to strings");
            for (var it = o.fields(); it.hasNext(); ) {
                var e = it.next();
                if (!e.getValue().isTextual()) throw fail.apply("\"producer.quantization.overrides\" must map module paths to strings, has " + e.getValue());
                overrides.put(e.getKey(), e.getValue().asText());
            }
        }
        return new DumpManifest.Quantization(text(q, "format", "producer.quantization.format", fail), text(q, "mode", "producer.quantization.mode", fail),
                integer(q, "bits", fail), integer(q, "group_size", fail), o == null || o.isNull() ? null : overrides);
    }

    private static Integer integer(JsonNode q, String key, Function<String, BadInputException> fail) {
        JsonNode n = q.get(key);
        if (n == null || n.isNull()) return null;
        if (!n.isIntegralNumber() || !n.canConvertToInt()) throw fail.apply("\"producer.quantization." + key + "\" must be an integer, got " + n);
        return n.intValue();
    }

    private static String text(JsonNode obj, String key, String label, Function<String, BadInputException> fail) {
        JsonNode n = obj.get(key);
        if (n == null || n.isNull()) return null;
        if (!n.isTextual()) throw fail.apply("\"" + label + "\" must be a string, got " + n);
        return n.asText();
    }

    private static List<String> strings(JsonNode obj, String key, Function<String, BadInputException> fail) {
        JsonNode n = obj.get(key);
        if (n == null || n.isNull()) return null;
        if (!n.isArray()) throw fail.apply("\"producer." + key + "\" must be an array of strings");
        var out = new ArrayList<String>();
        for (JsonNode e : n) {
            if (!e.isTextual()) throw fail.apply("\"producer." + key + "\" must be an array of strings, has " + e);
            out.add(e.asText());
        }
        return out;
    }
}
