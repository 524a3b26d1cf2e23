package dev.decodiff.harness.arch.gemma4.sweep;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.decodiff.engine.Gemma4Config;
import dev.decodiff.harness.BadInputException;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;

/** A scenario as JSON (docs/scenarios.md): read from a file with one-line errors naming the fix, and written for repros. */
public final class ScenarioJson {
    private static final ObjectMapper JSON = new ObjectMapper();

    private ScenarioJson() {}

    public static Scenario read(Path file, Gemma4Config cfg) {
        JsonNode root;
        try {
            root = JSON.readTree(file.toFile());
        } catch (IOException e) {
            throw new BadInputException(file, "is not readable JSON (" + e.getMessage().lines().findFirst().orElse("") + "); see docs/scenarios.md for the format");
        }
        try {
            return parse(root, cfg);
        } catch (IllegalArgumentException | NullPointerException e) {
            throw new BadInputException(file, e.getMessage() + "; see docs/scenarios.md for the format");
        }
    }

    static Scenario parse(JsonNode root, Gemma4Config cfg) {
        if (root == null || !root.isObject()) throw new IllegalArgumentException("the top level must be an object");
        var seqs = need(root, "sequences");
        var streams = new LinkedHashMap<Integer, int[]>();
        for (var it = seqs.fields(); it.hasNext(); ) {
            var e = it.next();
            int id = parseSeq(e.getKey());
            var v = e.getValue();
            if (v.isArray()) {
                int[] t = new int[v.size()];
                for (int i = 0; i < t.length; i++) {
                    t[i] = v.get(i).asInt(-1);
                    if (t[i] < 0 || t[i] >= cfg.vocabSize())
                        throw new IllegalArgumentException("sequence " + id + ": token " + v.get(i) + " is outside the vocabulary [0, " + cfg.vocabSize() + ")");
                }
                streams.put(id, t);
            } else if (v.isObject() && v.has("length")) {
                streams.put(id, Families.stream(cfg, id, v.get("length").asInt()));
            } else throw new IllegalArgumentException("sequence " + id + " must be a list of token ids or {\"length\": N}");
        }
        var schedules = new ArrayList<List<Op>>();
        for (var sched : need(root, "schedules")) {
            var ops = new ArrayList<Op>();
            for (var op : sched) ops.add(op(op));
            schedules.add(ops);
        }
        if (schedules.size() < 2) throw new IllegalArgumentException("\"schedules\" needs at least two schedules to compare, got " + schedules.size());
        var s = root.path("settings");
        var settings = new Scenario.Settings(s.path("type_k").asText("f32"), s.path("type_v").asText("f32"), s.path("flash_attention").asBoolean(false),
                s.path("swa_full").asBoolean(true), s.path("n_batch").asInt(0), s.path("n_ubatch").asInt(0), s.path("n_ctx").asInt(0));
        var b = root.path("boundary");
        var boundary = new Boundary(b.path("length").asInt(0), b.path("label").asText("given"), b.path("why").asText("from a scenario file"));
        String undefined = root.hasNonNull("undefined") ? root.get("undefined").asText() : null;
        return new Scenario(root.path("name").asText("scenario"), root.path("family").asText("file"), boundary, streams, schedules, settings, undefined);
    }

    private static int parseSeq(String key) {
        try {
            int id = Integer.parseInt(key);
            if (id < 0) throw new NumberFormatException();
            return id;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("sequence ids are numbers ≥ 0, got \"" + key + "\"");
        }
    }

    private static JsonNode need(JsonNode n, String field) {
        var v = n.get(field);
        if (v == null || v.isNull()) throw new IllegalArgumentException("\"" + field + "\" is missing");
        return v;
    }

    private static int num(JsonNode n, String field) {
        var v = need(n, field);
        if (!v.canConvertToInt()) throw new IllegalArgumentException("\"" + field + "\" must be a number, got " + v);
        return v.asInt();
    }

    private static Op op(JsonNode n) {
        String kind = need(n, "op").asText();
        return switch (kind) {
            case "feed" -> new Op.Feed(num(n, "seq"), num(n, "n"));
            case "batch" -> {
                var feeds = new ArrayList<Op.Feed>();
                for (var f : need(n, "feeds")) feeds.add(new Op.Feed(num(f, "seq"), num(f, "n")));
                yield new Op.Batch(feeds);
            }
            case "snapshot" -> new Op.Snapshot(num(n, "seq"), need(n, "name").asText());
            case "restore" -> new Op.Restore(num(n, "seq"), need(n, "name").asText());
            case "truncate" -> new Op.Truncate(num(n, "seq"), num(n, "length"));
            case "copy" -> new Op.Copy(num(n, "from"), num(n, "to"), num(n, "length"));
            case "offset" -> new Op.Offset(num(n, "seq"), num(n, "n"));
            case "shift" -> new Op.Shift(num(n, "seq"), num(n, "delta"));
            default -> throw new IllegalArgumentException("unknown op \"" + kind + "\" (feed, batch, snapshot, restore, truncate, copy, offset, shift)");
        };
    }

    public static ObjectNode write(Scenario sc) {
        var root = JSON.createObjectNode();
        root.put("name", sc.name());
        root.put("family", sc.family());
        var b = root.putObject("boundary");
        b.put("length", sc.boundary().length());
        b.put("label", sc.boundary().label());
        b.put("why", sc.boundary().why());
        var s = root.putObject("settings");
        var st = sc.settings();
        s.put("type_k", st.typeK());
        s.put("type_v", st.typeV());
        s.put("flash_attention", st.flashAttention());
        s.put("swa_full", st.swaFull());
        s.put("n_batch", st.nBatch());
        s.put("n_ubatch", st.nUbatch());
        s.put("n_ctx", st.nCtx());
        if (sc.undefinedWhy() != null) root.put("undefined", sc.undefinedWhy());
        else root.putNull("undefined");
        var seqs = root.putObject("sequences");
        sc.streams().entrySet().stream().sorted(java.util.Map.Entry.comparingByKey()).forEach(e -> {
            var a = seqs.putArray(String.valueOf(e.getKey()));
            for (int t : e.getValue()) a.add(t);
        });
        var schedules = root.putArray("schedules");
        for (var sched : sc.schedules()) {
            var a = schedules.addArray();
            for (var op : sched) a.add(op(op));
        }
        return root;
    }

    private static ObjectNode op(Op op) {
        var n = JSON.createObjectNode();
        switch (op) {
            case Op.Feed f -> n.put("op", "feed").put("seq", f.seq()).put("n", f.n());
            case Op.Batch b -> {
                n.put("op", "batch");
                ArrayNode feeds = n.putArray("feeds");
                for (var f : b.feeds()) feeds.addObject().put("seq", f.seq()).put("n", f.n());
            }
            case Op.Snapshot s -> n.put("op", "snapshot").put("seq", s.seq()).put("name", s.name());
            case Op.Restore r -> n.put("op", "restore").put("seq", r.seq()).put("name", r.name());
            case Op.Truncate t -> n.put("op", "truncate").put("seq", t.seq()).put("length", t.length());
            case Op.Copy c -> n.put("op", "copy").put("from", c.from()).put("to", c.to()).put("length", c.length());
            case Op.Offset o -> n.put("op", "offset").put("seq", o.seq()).put("n", o.n());
            case Op.Shift s -> n.put("op", "shift").put("seq", s.seq()).put("delta", s.delta());
        }
        return n;
    }

    public static String pretty(Scenario sc) {
        try {
            return JSON.writerWithDefaultPrettyPrinter().writeValueAsString(write(sc)) + "\n";
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    public static void save(Scenario sc, Path file) throws IOException { Files.writeString(file, pretty(sc)); }
}
