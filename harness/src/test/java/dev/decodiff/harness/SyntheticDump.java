package dev.decodiff.harness;

import dev.decodiff.harness.dump.CapturedTensor;
import dev.decodiff.harness.dump.DumpManifest;
import dev.decodiff.harness.dump.DumpWriter;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * Small synthetic dumps for harness mechanics: 3 layers (nh 4, nkv 2, d 8, H 16), a 5-token prompt and 3 decode
 * steps, every contract point (docs/dump-format.md) except ple/moe. k_read/v_read rows are the keys/values of each position, so
 * they stay consistent across steps like a real cache. A {@link Mutation} edits the tensors before they are written.
 */
public final class SyntheticDump {
    public static final int LAYERS = 3, NH = 4, NKV = 2, D = 8, H = 16, V = 50, PROMPT = 5, STEPS = 4;
    public static final String CONFIG_SHA = "a".repeat(64), WEIGHTS_SHA = "b".repeat(64);

    @FunctionalInterface
    public interface Mutation {
        /** May change data in place, or replace entries of the step's map. */
        void apply(int step, Map<String, CapturedTensor> tensors);
    }

    public static final Mutation NONE = (s, t) -> {};

    private SyntheticDump() {}

    public static List<Integer> tokens() {
        var t = new ArrayList<Integer>();
        for (int i = 0; i < PROMPT + STEPS; i++) t.add((i * 7 + 2) % V);
        return t;
    }

    public static Path write(Path dir, Mutation m) { return write(dir, m, CONFIG_SHA, tokens()); }

    public static Path write(Path dir, Mutation m, String configSha, List<Integer> tokens) {
        return write(dir, m, configSha, tokens, STEPS);
    }

    public static Path write(Path dir, Mutation m, String configSha, List<Integer> tokens, int steps) {
        var w = DumpWriter.create(dir, true, new DumpManifest.Producer("synthetic", "1", "float32", "none"),
                new DumpManifest.Model("gemma4_text", LAYERS, configSha, WEIGHTS_SHA), tokens, PROMPT);
        for (int s = 0; s < steps; s++) {
            int start = s == 0 ? 0 : PROMPT + s - 1, len = s == 0 ? PROMPT : 1;
            var t = step(s, start, len);
            m.apply(s, t);
            if (!t.containsKey("logits")) {
                w.writeStep(start, len, t.values(), null, null);
                continue;
            }
            float[] logits = t.get("logits").data();
            int best = 0;
            for (int i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
            float second = Float.NEGATIVE_INFINITY;
            for (int i = 0; i < logits.length; i++) if (i != best) second = Math.max(second, logits[i]);
            w.writeStep(start, len, t.values(), best, (double) logits[best] - second);
        }
        w.finish();
        return dir;
    }

    /** A dump its producer never finished (killed after {@code steps} steps, disk full): no completeness mark. */
    public static Path unfinished(Path dir, int steps) {
        write(dir, NONE, CONFIG_SHA, tokens(), steps);
        editManifest(dir, "\"complete\" : true", "\"complete\" : false");
        return dir;
    }

    /** Records a point selection in the dump's manifest, as dump --points would have. */
    public static void selectPoints(Path dir, String... globs) {
        var quoted = java.util.Arrays.stream(globs).map(g -> "\"" + g + "\"").toList();
        editManifest(dir, "\"steps\" :", "\"selected_points\" : [ " + String.join(", ", quoted) + " ],\n  \"steps\" :");
    }

    /** Replaces text in manifest.json; the text must be there (an edit that changes nothing is a broken test). */
    public static void editManifest(Path dir, String from, String to) {
        Path mf = dir.resolve("manifest.json");
        try {
            String text = java.nio.file.Files.readString(mf);
            if (!text.contains(from)) throw new IllegalStateException(mf + " has no " + from);
            java.nio.file.Files.writeString(mf, text.replace(from, to));
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    /** Overwrites one byte of a file, {@code offset} bytes after the first occurrence of an ASCII marker. */
    public static void replaceByte(Path f, String marker, int offset, int value) {
        try {
            byte[] b = java.nio.file.Files.readAllBytes(f);
            int at = new String(b, java.nio.charset.StandardCharsets.ISO_8859_1).indexOf(marker);
            if (at < 0) throw new IllegalStateException(f + " has no " + marker);
            b[at + offset] = (byte) value;
            java.nio.file.Files.write(f, b);
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    /** A safetensors file with exactly this header text (as UTF-8) and this many zero data bytes. */
    public static void writeRaw(Path f, String header, int dataBytes) {
        byte[] h = header.getBytes(java.nio.charset.StandardCharsets.UTF_8);
        var b = java.nio.ByteBuffer.allocate(8 + h.length + dataBytes).order(java.nio.ByteOrder.LITTLE_ENDIAN);
        b.putLong(h.length).put(h);
        try {
            java.nio.file.Files.write(f, b.array());
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    static float[] rand(long seed, int n, double scale) {
        var r = new SplittableRandom(seed);
        var a = new float[n];
        for (int i = 0; i < n; i++) a[i] = (float) ((r.nextDouble() * 2 - 1) * scale);
        return a;
    }

    static long seed(String what, int a, int b) { return what.hashCode() * 1_000_003L + a * 7919L + b; }

    static float[] row(String what, int layer, int pos, int n) { return rand(seed(what, layer, pos), n, 1.0); }

    public static Map<String, CapturedTensor> step(int s, int start, int len) {
        var t = new LinkedHashMap<String, CapturedTensor>();
        put(t, "embed", new long[]{len, H}, rows("embed", 0, start, len, H));
        for (int l = 0; l < LAYERS; l++) {
            String p = "layers." + l + ".";
            put(t, p + "attn.q", new long[]{len, NH, D}, rows("q" + l, l, start, len, NH * D));
            put(t, p + "attn.k", new long[]{len, NKV, D}, rows("k", l, start, len, NKV * D));
            put(t, p + "attn.v", new long[]{len, NKV, D}, rows("v", l, start, len, NKV * D));
            int c = start + len;
            put(t, p + "attn.k_read", new long[]{c, NKV, D}, rows("k", l, 0, c, NKV * D));
            put(t, p + "attn.v_read", new long[]{c, NKV, D}, rows("v", l, 0, c, NKV * D));
            put(t, p + "attn.out", new long[]{len, NH * D}, rows("ao", l, start, len, NH * D));
            put(t, p + "mlp.out", new long[]{len, H}, rows("mlp", l, start, len, H));
            put(t, p + "out", new long[]{len, H}, rows("out", l, start, len, H));
        }
        put(t, "final_norm", new long[]{len, H}, rows("fn", 0, start, len, H));
        float[] logits = rand(seed("logits", s, 0), V, 3.0);
        logits[(s * 11 + 3) % V] = 10f; // a clear winner
        put(t, "logits", new long[]{V}, logits);
        return t;
    }

    static float[] rows(String what, int layer, int from, int count, int width) {
        var a = new float[count * width];
        for (int i = 0; i < count; i++) System.arraycopy(row(what, layer, from + i, width), 0, a, i * width, width);
        return a;
    }

    static void put(Map<String, CapturedTensor> t, String name, long[] shape, float[] data) {
        t.put(name, new CapturedTensor(name, shape, data));
    }
}
