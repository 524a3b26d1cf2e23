package dev.decodiff.harness.compare;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.engine.CapturePoints;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.NearestName;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * Tolerances (max rel L2) per capture point, and the near-tie threshold for token flips. The defaults are for an
 * fp32 candidate against an fp32 reference (docs/tolerances.md says why each is what it is). A JSON profile
 * overrides any of them:
 * <pre>{"default": 1e-4, "near_tie": 0.01, "points": {"logits": 2e-4, "attn.k_read": 1e-4, "layers.5.*": 1e-3}}</pre>
 * A key of "points" is a point kind ("attn.out", "logits"), a full point name, or a glob over full names;
 * the most specific wins: full name, then the longest glob, then kind, then the default.
 */
public final class ToleranceProfile {
    public static final double DEFAULT_TOLERANCE = 1e-4;
    public static final double DEFAULT_NEAR_TIE = 0.01;

    /** The keys a profile file may hold ("description" and "calibration" are notes calibrate writes). */
    static final List<String> TOP_LEVEL_KEYS = List.of("default", "near_tie", "points", "description", "calibration");

    /** Defaults per point kind for fp32 against fp32. */
    public static final Map<String, Double> DEFAULT_KINDS = defaultKinds();

    private final String source;
    private final double fallback;
    private final double nearTie;
    private final Map<String, Double> kinds;
    private final Map<String, Double> names;
    private final List<Map.Entry<Pattern, Double>> globs;
    /** The globs as written in the profile file, each with its pattern (file order). */
    private final Map<String, Pattern> globKeys;

    private ToleranceProfile(String source, double fallback, double nearTie, Map<String, Double> kinds,
                             Map<String, Double> names, List<Map.Entry<Pattern, Double>> globs) {
        this(source, fallback, nearTie, kinds, names, globs, Map.of());
    }

    private ToleranceProfile(String source, double fallback, double nearTie, Map<String, Double> kinds,
                             Map<String, Double> names, List<Map.Entry<Pattern, Double>> globs, Map<String, Pattern> globKeys) {
        this.globKeys = globKeys;
        this.source = source;
        this.fallback = fallback;
        this.nearTie = nearTie;
        this.kinds = kinds;
        this.names = names;
        this.globs = globs;
    }

    private static Map<String, Double> defaultKinds() {
        var m = new LinkedHashMap<String, Double>();
        m.put(CapturePoints.EMBED, 1e-5); // a row lookup times one scale: nothing accumulates
        m.put(CapturePoints.PLE, 1e-4);
        for (String s : CapturePoints.LAYER_SUFFIXES) m.put(s, DEFAULT_TOLERANCE);
        m.put(CapturePoints.FINAL_NORM, DEFAULT_TOLERANCE);
        m.put(CapturePoints.LOGITS, DEFAULT_TOLERANCE);
        return java.util.Collections.unmodifiableMap(m);
    }

    public static ToleranceProfile defaults() {
        return new ToleranceProfile("built-in fp32 defaults", DEFAULT_TOLERANCE, DEFAULT_NEAR_TIE, DEFAULT_KINDS, Map.of(), List.of());
    }

    /** Reads a profile file; keys it does not set keep their defaults. */
    public static ToleranceProfile load(Path file) {
        JsonNode root;
        try {
            root = new ObjectMapper().readTree(Files.readString(file));
        } catch (IOException e) {
            String why = e instanceof com.fasterxml.jackson.core.JsonProcessingException ? "is not valid JSON (" + dev.decodiff.metal.JsonErrors.plain(e) + ")" : "cannot be read: " + e.getMessage();
            throw new BadInputException(file, why + "; a tolerance profile looks like {\"default\": 1e-4, \"points\": {\"logits\": 2e-4}}");
        }
        if (root == null || !root.isObject()) throw new BadInputException(file, "must be a JSON object like {\"default\": 1e-4, \"points\": {…}}");
        for (var it = root.fieldNames(); it.hasNext(); ) {
            String key = it.next();
            if (!TOP_LEVEL_KEYS.contains(key))
                throw new BadInputException(file, "unknown key \"" + key + "\" (did you mean \"" + NearestName.to(key, TOP_LEVEL_KEYS)
                        + "\"?); a profile has " + String.join(", ", TOP_LEVEL_KEYS.stream().map(k -> "\"" + k + "\"").toList()));
        }
        double fallback = positive(file, root, "default", DEFAULT_TOLERANCE);
        double nearTie = root.has("near_tie") ? nonNegative(file, root.get("near_tie"), "near_tie") : DEFAULT_NEAR_TIE;
        var kinds = new LinkedHashMap<>(DEFAULT_KINDS);
        if (root.has("default")) kinds.replaceAll((k, v) -> k.equals(CapturePoints.EMBED) ? Math.min(v, fallback) : fallback);
        var names = new LinkedHashMap<String, Double>();
        var globs = new ArrayList<Map.Entry<Pattern, Double>>();
        var globKeys = new LinkedHashMap<String, Pattern>();
        JsonNode pts = root.get("points");
        if (pts != null) {
            if (!pts.isObject()) throw new BadInputException(file, "\"points\" must be an object of point → tolerance");
            for (var it = pts.fields(); it.hasNext(); ) {
                var e = it.next();
                double tol = positive(file, pts, e.getKey(), 0);
                String key = e.getKey();
                checkPointKey(file, key);
                if (key.contains("*") || key.contains("?")) {
                    globs.add(Map.entry(glob(key), tol));
                    globKeys.put(key, glob(key));
                }
                else if (CapturePoints.layerOf(key) >= 0) names.put(key, tol);
                else kinds.put(key, tol);
            }
        }
        globs.sort(Comparator.comparingInt((Map.Entry<Pattern, Double> e) -> e.getKey().pattern().length()).reversed());
        return new ToleranceProfile(file.toString(), fallback, nearTie, kinds, names, globs, java.util.Collections.unmodifiableMap(globKeys));
    }

    /**
     * Refuses a glob of the profile file that selects none of {@code points} (the reference's): like a misspelled
     * key, a glob that matches nothing ("layer.5.*" for "layers.5.*") sets no tolerance and leaves the defaults
     * silently in force.
     */
    public void checkGlobsMatch(java.util.Collection<String> points, String whose) {
        for (var g : globKeys.entrySet()) {
            if (points.stream().noneMatch(p -> g.getValue().matcher(p).matches()))
                throw new BadInputException(Path.of(source), "the glob \"" + g.getKey() + "\" in \"points\" matches no point of " + whose
                        + ", so it sets no tolerance; fix the glob (point names are like \"layers.3.attn.out\", '*' matches any run of characters) or drop it");
        }
    }

    /**
     * A key of "points" must name a point decodiff knows: a kind ("attn.out"), or a layer point ("layers.3.attn.out").
     * A misspelled one would otherwise set nothing and leave the default silently in force. Globs are free-form
     * (a producer's own points can be reached through them).
     */
    private static void checkPointKey(Path file, String key) {
        if (key.contains("*") || key.contains("?")) return;
        int layer = CapturePoints.layerOf(key);
        String kind = layer >= 0 ? CapturePoints.kindOf(key) : key;
        boolean known = layer >= 0 ? CapturePoints.LAYER_SUFFIXES.contains(kind) : DEFAULT_KINDS.containsKey(key);
        if (known) return;
        var valid = new ArrayList<String>(DEFAULT_KINDS.keySet());
        if (layer >= 0) valid.replaceAll(k -> CapturePoints.LAYER_SUFFIXES.contains(k) ? CapturePoints.layer(layer, k) : k);
        throw new BadInputException(file, "\"points\" has an unknown point \"" + key + "\" (did you mean \"" + NearestName.to(key, valid)
                + "\"?); keys are point kinds (" + String.join(", ", DEFAULT_KINDS.keySet()) + "), layer points like \"layers.3.attn.out\", or globs");
    }

    private static double positive(Path file, JsonNode obj, String key, double dflt) {
        JsonNode n = obj.get(key);
        if (n == null) return dflt;
        if (!n.isNumber() || !(n.asDouble() > 0) || !Double.isFinite(n.asDouble()))
            throw new BadInputException(file, "tolerance for \"" + key + "\" must be a positive number, got " + n);
        return n.asDouble();
    }

    private static double nonNegative(Path file, JsonNode n, String key) {
        if (!n.isNumber() || !(n.asDouble() >= 0) || !Double.isFinite(n.asDouble())) throw new BadInputException(file, "\"" + key + "\" must be a finite number ≥ 0, got " + n);
        return n.asDouble();
    }

    /** A glob over point names: '*' matches any run of characters (dots too), '?' one character. */
    public static Pattern glob(String g) {
        var sb = new StringBuilder();
        for (char ch : g.toCharArray()) {
            if (ch == '*') sb.append(".*");
            else if (ch == '?') sb.append('.');
            else sb.append(Pattern.quote(String.valueOf(ch)));
        }
        return Pattern.compile(sb.toString());
    }

    /** The profile bundled for references computed in bfloat16 (docs/tolerances.md: how it was calibrated). */
    public static ToleranceProfile bf16() {
        try (var in = ToleranceProfile.class.getResourceAsStream("/dev/decodiff/harness/profiles/bf16.json")) {
            if (in == null) throw new IllegalStateException("the built-in bf16 profile is missing from the jar");
            Path tmp = java.nio.file.Files.createTempFile("decodiff-bf16", ".json");
            try {
                java.nio.file.Files.write(tmp, in.readAllBytes());
                var p = load(tmp);
                return new ToleranceProfile("built-in bf16 noise floor", p.fallback, p.nearTie, p.kinds, p.names, p.globs);
            } finally {
                java.nio.file.Files.deleteIfExists(tmp);
            }
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    /**
     * The profile a reference calls for when the user names none: the bf16 noise floor for a reference computed in
     * 16-bit floats, else the fp32 defaults. Every command judging cells against a reference uses this one rule.
     */
    public static ToleranceProfile forReference(dev.decodiff.harness.dump.DumpManifest.Producer producer) {
        return producer != null && isHalfPrecision(producer.dtype()) ? bf16() : defaults();
    }

    /** Whether a producer dtype names a 16-bit float computation (its reference needs the bf16 profile). */
    public static boolean isHalfPrecision(String dtype) {
        if (dtype == null) return false;
        String d = dtype.toLowerCase(java.util.Locale.ROOT);
        return d.equals("bfloat16") || d.equals("bf16") || d.equals("float16") || d.equals("fp16") || d.equals("half");
    }

    public ToleranceProfile withNearTie(double t) {
        return new ToleranceProfile(source, fallback, t, kinds, names, globs, globKeys);
    }

    public double nearTie() { return nearTie; }

    public String source() { return source; }

    public double tolerance(String point) {
        Double t = names.get(point);
        if (t != null) return t;
        for (var g : globs) if (g.getKey().matcher(point).matches()) return g.getValue();
        t = kinds.get(CapturePoints.kindOf(point));
        return t != null ? t : fallback;
    }

    /** Tolerance per kind, for reports. */
    public Map<String, Double> kinds() { return kinds; }
}
