package dev.decodiff.harness.dump;

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

    /** Who wrote the dump and how it computed (free-form beyond name/version; dtype "float32" or "bfloat16" …). */
    @JsonIgnoreProperties(ignoreUnknown = true)
    @JsonPropertyOrder({"name", "version", "dtype", "attention"})
    public record Producer(
            @JsonProperty("name") String name,
            @JsonProperty("version") String version,
            @JsonProperty("dtype") String dtype,
            @JsonProperty("attention") String attention) {}

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

    public int[] tokenArray() { return tokens.stream().mapToInt(Integer::intValue).toArray(); }

    /** The tokens step s feeds. */
    public int[] stepTokens(int s) {
        var st = steps.get(s);
        return tokens.subList(st.start(), st.end()).stream().mapToInt(Integer::intValue).toArray();
    }

    public static String stepFileName(int index) { return String.format("step-%04d.safetensors", index); }

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
