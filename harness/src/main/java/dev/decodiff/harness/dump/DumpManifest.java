package dev.decodiff.harness.dump;

import dev.decodiff.harness.report.Fmt;
import com.fasterxml.jackson.annotation.JsonIgnoreProperties;
import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonProperty;
import com.fasterxml.jackson.annotation.JsonPropertyOrder;

import java.util.List;

/**
 * manifest.json of a dump, format v1 (docs/dump-format.md). Unknown fields are ignored when reading; {@link DumpReader}
 * checks the schema and the consistency of steps, tokens and prompt_length. {@code complete} is the producer's word
 * that it wrote every step it meant to: it is written last, so a dump cut short (killed, disk full) lacks it.
 * {@code selected_points} is the user's explicit choice of points (globs), absent when the producer recorded all.
 */
@JsonIgnoreProperties(ignoreUnknown = true)
@JsonPropertyOrder({"format", "version", "producer", "model", "tokens", "prompt_length", "selected_points", "steps", "complete"})
public record DumpManifest(
        @JsonProperty("format") String format,
        @JsonProperty("version") int version,
        @JsonProperty("producer") Producer producer,
        @JsonProperty("model") Model model,
        @JsonProperty("tokens") List<Integer> tokens,
        @JsonProperty("prompt_length") int promptLength,
        @JsonProperty("selected_points") @JsonInclude(JsonInclude.Include.NON_NULL) List<String> selectedPoints,
        @JsonProperty("steps") List<Step> steps,
        @JsonProperty("complete") boolean complete) {

    public static final String FORMAT = "decodiff-dump";
    public static final int VERSION = 1;
    public static final String FILE_NAME = "manifest.json";

    public DumpManifest {
        tokens = tokens == null ? List.of() : List.copyOf(tokens);
        steps = steps == null ? List.of() : List.copyOf(steps);
        selectedPoints = selectedPoints == null ? null : List.copyOf(selectedPoints);
    }

    /**
     * Who wrote the dump and how it computed (free-form beyond name/version; dtype "float32" or "bfloat16" …). The
     * provenance fields are optional for other producers; decodiff writes them all: the engine, the kernels it ran
     * on, the KV cache's storage types, the catalog faults switched on, and the options of the command that wrote it.
     * A dump with faults or a lossy KV cache is not an exact computation and is refused as a reference unless asked.
     */
    @JsonIgnoreProperties(ignoreUnknown = true)
    @JsonInclude(JsonInclude.Include.NON_NULL)
    @JsonPropertyOrder({"name", "version", "dtype", "attention", "engine", "kernels", "matmul", "kv_cache", "quantization", "faults", "options"})
    public record Producer(
            @JsonProperty("name") String name,
            @JsonProperty("version") String version,
            @JsonProperty("dtype") String dtype,
            @JsonProperty("attention") String attention,
            @JsonProperty("engine") String engine,
            @JsonProperty("kernels") String kernels,
            @JsonProperty("matmul") String matmul,
            @JsonProperty("kv_cache") KvCache kvCache,
            @JsonProperty("faults") List<String> faults,
            @JsonProperty("options") List<String> options,
            @JsonProperty("quantization") Quantization quantization) {

        public Producer {
            faults = faults == null ? null : List.copyOf(faults);
            options = options == null ? null : List.copyOf(options);
        }

        /** A producer that ran unquantized (float) weights, or does not say. */
        public Producer(String name, String version, String dtype, String attention, String engine, String kernels, String matmul,
                        KvCache kvCache, List<String> faults, List<String> options) {
            this(name, version, dtype, attention, engine, kernels, matmul, kvCache, faults, options, null);
        }

        public Producer withQuantization(Quantization q) {
            return new Producer(name, version, dtype, attention, engine, kernels, matmul, kvCache, faults, options, q);
        }

        /** decodiff wrote it: its producer always states the quantization, so none means float weights. */
        public boolean statesQuantization() { return "decodiff".equals(name) || quantization != null; }

        /** A producer that states only who it is and its dtype (other producers; older decodiff dumps). */
        public Producer(String name, String version, String dtype, String attention) {
            this(name, version, dtype, attention, null, null, null, null, null, null);
        }

        /** Catalog faults were switched on: the numbers are wrong on purpose. */
        public boolean faulted() { return faults != null && !faults.isEmpty(); }

        /** The KV cache stored keys or values in a lossy type (bf16, q8_0, q4_0): the numbers carry its rounding. */
        public boolean lossyKvCache() { return kvCache != null && !(kvCache.exact()); }

        /** The matrix products rounded their inputs (e.g. "bf16" activations): the numbers carry that rounding. */
        public boolean lossyMatmul() { return matmul != null && !"fp32".equals(matmul) && !"fp32-fma".equals(matmul); }

        /** One line for report headers: "decodiff 0.1.0, float32, engine decodiff-java, kernels …, KV cache q8_0/q8_0, faults ring-wrap". */
        public String describe() {
            var parts = new java.util.ArrayList<String>();
            if (name != null) parts.add(version == null ? name : name + " " + version);
            if (dtype != null) parts.add(dtype);
            if (engine != null) parts.add("engine " + engine);
            if (kernels != null) parts.add("kernels " + kernels);
            if (lossyMatmul()) parts.add("matmul " + matmul);
            if (kvCache != null) parts.add("KV cache " + kvCache.keys() + "/" + kvCache.values());
            if (faulted()) parts.add("faults " + String.join(",", faults));
            return String.join(", ", parts);
        }
    }

    /**
     * The quantized weights a producer ran, dequantized to fp32: format "mlx" (mode "affine", default bits and
     * group_size, the per-module overrides as "8-bit, group 64" or "not quantized") or "gguf" (mode = the tensor
     * types, e.g. "Q4_K"). Absent: float weights (or a producer that does not say).
     */
    @JsonInclude(JsonInclude.Include.NON_NULL)
    @JsonPropertyOrder({"format", "mode", "bits", "group_size", "overrides"})
    public record Quantization(
            @JsonProperty("format") String format,
            @JsonProperty("mode") String mode,
            @JsonProperty("bits") Integer bits,
            @JsonProperty("group_size") Integer groupSize,
            @JsonProperty("overrides") java.util.Map<String, String> overrides) {

        public Quantization {
            overrides = overrides == null ? null : java.util.Collections.unmodifiableMap(new java.util.LinkedHashMap<>(overrides));
        }

        /**
         * What differs between two statements of quantization, by meaning: module paths compared without their
         * wrappers' prefixes ({@code model.}, {@code language_model.}, {@code model.language_model.}), an override that
         * repeats the defaults or keeps a module that is never quantized (a norm, a scalar) in float counts as no override.
         * Empty: the same model.
         */
        public java.util.List<String> differences(Quantization o) {
            var out = new java.util.ArrayList<String>();
            if (!java.util.Objects.equals(lower(format), lower(o.format))) out.add("format " + format + " vs " + o.format);
            if (!java.util.Objects.equals(lower(mode), lower(o.mode))) out.add("mode " + mode + " vs " + o.mode);
            if (!java.util.Objects.equals(bits, o.bits)) out.add("bits " + bits + " vs " + o.bits);
            if (!java.util.Objects.equals(groupSize, o.groupSize)) out.add("group size " + groupSize + " vs " + o.groupSize);
            var a = canonicalOverrides();
            var b = o.canonicalOverrides();
            var keys = new java.util.TreeSet<>(a.keySet());
            keys.addAll(b.keySet());
            for (String k : keys) {
                String x = a.get(k), y = b.get(k);
                if (!java.util.Objects.equals(x, y))
                    out.add(k + ": " + (x == null ? "the defaults" : x) + " vs " + (y == null ? "the defaults" : y));
            }
            return out;
        }

        private static String lower(String s) { return s == null ? null : s.toLowerCase(java.util.Locale.ROOT); }

        private java.util.Map<String, String> canonicalOverrides() {
            var m = new java.util.TreeMap<String, String>();
            if (overrides == null) return m;
            String defaults = bits == null ? null : bits + "-bit" + (groupSize == null ? "" : ", group " + groupSize);
            for (var e : overrides.entrySet()) {
                String k = canonicalModule(e.getKey()), v = e.getValue() == null ? "" : e.getValue().trim();
                if (v.equals(defaults)) continue;
                if (v.equalsIgnoreCase("not quantized") && neverQuantized(k)) continue;
                m.put(k, v);
            }
            return m;
        }

        /** A module path without the wrappers a multimodal or causal-LM checkpoint puts in front of the text model's. */
        static String canonicalModule(String path) {
            String p = path;
            boolean again = true;
            while (again) {
                again = false;
                for (String prefix : new String[]{"model.", "language_model."})
                    if (p.startsWith(prefix)) {
                        p = p.substring(prefix.length());
                        again = true;
                    }
            }
            return p;
        }

        /** Modules MLX never quantizes (only linear and embedding matrices are), listed as "not quantized" by some producers. */
        private static boolean neverQuantized(String module) {
            String last = module.substring(module.lastIndexOf('.') + 1);
            return last.contains("norm") || last.contains("scalar") || last.equals("bias");
        }

        /** "MLX affine 4-bit, group 64, 1 override (language_model.model.layers.0.mlp.down_proj: 8-bit, group 64)". */
        public String describe() {
            var sb = new StringBuilder(format == null ? "quantized" : format.toUpperCase(java.util.Locale.ROOT));
            if (mode != null) sb.append(' ').append(mode);
            if (bits != null) sb.append(' ').append(bits).append("-bit");
            if (groupSize != null) sb.append(", group ").append(groupSize);
            if (overrides != null && !overrides.isEmpty()) {
                sb.append(", ").append(overrides.size()).append(overrides.size() == 1 ? " override (" : " overrides (");
                int i = 0;
                for (var e : overrides.entrySet()) {
                    if (i++ == 3) {
                        sb.append(", …");
                        break;
                    }
                    if (i > 1) sb.append(", ");
                    sb.append(e.getKey()).append(": ").append(e.getValue());
                }
                sb.append(')');
            }
            return sb.toString();
        }
    }

    /** The weights a producer ran, in words: "MLX affine 4-bit, group 64 weights" or "float (unquantized) weights". */
    public static String weights(Quantization q) { return q == null ? "float (unquantized) weights" : q.describe() + " weights"; }

    /** How a producer's KV cache stored keys and values ("f32" is exact; "bf16", "q8_0", "q4_0" round). */
    public record KvCache(@JsonProperty("keys") String keys, @JsonProperty("values") String values) {
        public boolean exact() { return "f32".equals(keys) && "f32".equals(values); }
    }

    /** Which checkpoint produced the dump: two dumps are comparable only when these agree. */
    @JsonIgnoreProperties(ignoreUnknown = true)
    @JsonPropertyOrder({"model_type", "num_hidden_layers", "config_sha256", "weights_sha256"})
    public record Model(
            @JsonProperty("model_type") String modelType,
            @JsonProperty("num_hidden_layers") int numHiddenLayers,
            @JsonProperty("config_sha256") String configSha256,
            @JsonProperty("weights_sha256") String weightsSha256) {}

    /** One step: it fed positions [start, start+length); next_token/top2_margin are the producer's own greedy pick. */
    @JsonIgnoreProperties(ignoreUnknown = true)
    @JsonInclude(JsonInclude.Include.NON_NULL)
    @JsonPropertyOrder({"index", "start", "length", "file", "next_token", "top2_margin"})
    public record Step(
            @JsonProperty("index") int index,
            @JsonProperty("start") int start,
            @JsonProperty("length") int length,
            @JsonProperty("file") String file,
            @JsonProperty("next_token") Integer nextToken,
            @JsonProperty("top2_margin") Double top2Margin) {

        public int end() { return start + length; }
    }

    public int stepCount() { return steps.size(); }

    public Step step(int i) { return steps.get(i); }

    /** Each step's first position, in step order (what a fault catalog's rule reads to find its step). */
    public int[] stepStarts() { return steps.stream().mapToInt(Step::start).toArray(); }

    /** Each step's number of positions, in step order. */
    public int[] stepLengths() { return steps.stream().mapToInt(Step::length).toArray(); }

    public int[] tokenArray() { return tokens.stream().mapToInt(Integer::intValue).toArray(); }

    /** The tokens step s feeds. */
    public int[] stepTokens(int s) {
        var st = steps.get(s);
        return tokens.subList(st.start(), st.end()).stream().mapToInt(Integer::intValue).toArray();
    }

    public static String stepFileName(int index) { return Fmt.format("step-%04d.safetensors", index); }

    public DumpManifest withSteps(List<Step> newSteps) {
        return new DumpManifest(format, version, producer, model, tokens, promptLength, selectedPoints, newSteps, complete);
    }

    public DumpManifest withTokens(List<Integer> newTokens) {
        return new DumpManifest(format, version, producer, model, newTokens, promptLength, selectedPoints, steps, complete);
    }

    /** The same manifest with the completeness mark set. */
    public DumpManifest completed() {
        return new DumpManifest(format, version, producer, model, tokens, promptLength, selectedPoints, steps, true);
    }

    /** Whether a point was within the producer's recorded selection (every point is when there is none). */
    public boolean selects(String point) {
        return selectedPoints == null || PointSelection.of(selectedPoints).test(point);
    }
}
